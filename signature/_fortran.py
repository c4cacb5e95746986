"""Fortran-symbol wrappers, for MPIs whose Fortran layer bypasses the C entry points.

Open MPI's Fortran bindings (``libmpi_mpifh``: ``mpif.h`` and ``use mpi``;
``libmpi_usempif08``: ``use mpi_f08``) call ``PMPI_*`` directly, and so does
MPICH's ``use mpi_f08`` layer (``libmpichfort``), so the tracer's C wrappers
never see those calls. As Score-P and mpiP do, the tracer then also defines
the Fortran symbols themselves: ``mpi_send_``, ``mpi_send__``, ``mpi_send``,
``MPI_SEND``, Open MPI's internal ``ompi_send_f``, and the ``mpi_f08`` names
(``mpi_send_f08_``; MPICH's ``mpi_send_f08ts_`` with descriptor buffers and
``mpi_send_f08ts_large_`` with ``MPI_COUNT_KIND`` counts).

The wrappers are generated from

* a compact table of the Fortran signatures of the functions the tracer
  models (:data:`_TABLE`: one line per function, its shape and operation
  code), each shape being a parameter list plus the C that records the event
  from the converted arguments (handles through ``PMPI_*_f2c``, statuses
  through ``PMPI_Status_f2c``, sentinels such as ``MPI_IN_PLACE`` and
  ``MPI_STATUS_IGNORE`` by the addresses the library exports), and
* the symbols the MPI's Fortran libraries actually export (``nm -D``): a
  wrapper is generated only for a name the library has.

The Fortran symbols of every other function get a forwarder that counts the
calls and the time inside them ("MPI_File_write_all called 240 times: not
modelled"): a function the tracer does not model in the table of ``_build.py``'s
counting wrappers; one the C tracer models that this table lacks, in a table
of its own, unless the call reached the C wrapper and was recorded there
(MPICH's ``mpif.h``). Nothing a Fortran program calls is lost silently.

Each wrapper forwards to the library's own symbol, found with
``dlsym(RTLD_NEXT, name)``, and records one event around it with the
tracer's ``ev_begin``/``ev_end``. ``ev_begin`` marks the call as in progress,
so where the real Fortran function goes on to the C ``MPI_*`` entry points
(MPICH's ``mpif.h`` layer) or to another wrapped name (Open MPI's
``mpi_send_f08_`` calls ``ompi_send_f``), the inner wrapper records nothing: a
call is recorded once, by the outermost wrapper. The generated C file is
``#include``d at the end of ``sigex_trace.c`` and uses its static helpers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["wrappers", "fortran_libraries", "wrapped_symbols"]

# --------------------------------------------------------------------------------------------
# Shapes: Fortran parameter lists (every argument by reference) and the C that records one
# event.  Parameter kinds: B buffer (never read, except against MPI_IN_PLACE), N count, NA
# count array (MPI_COUNT_KIND in the *_large variants), X ignored (displacements, ops, groups,
# infos, logical arrays), I integer, H handle, S status, SA status array, E ierror (optional in
# mpi_f08, never read).  In the C, {L} is 1 for the large-count variants, {TS} 1 where buffers
# are array descriptors (MPICH's *_f08ts_), {F08} 1 for mpi_f08 statuses.
# --------------------------------------------------------------------------------------------

_REQ_POST = "e.req = req_add(PMPI_Request_f2c(*req), 0, 0, PEER_NONE, -1, e.bytes);"
#: After a call that creates a communicator: record its id (the C tracer's set_newcomm).
_NEWCOMM = """
      set_newcomm(&e, PMPI_Comm_f2c(*newcomm));"""

#: After Waitsome/Testsome: the completions of the requests named by ``indices``.
_SOME_COMPLETED = """
      if (*outcount != MPI_UNDEFINED)
        for (int i = 0, base = fw_some_base(reqs, *count, indices, *outcount); i < *outcount; i++) {
          int k = ((MPI_Fint *)indices)[i] - base;
          if (k < 0 || k >= *count) continue;
          fw_status_c(fw_status_at(statuses, i, {F08}), {F08}, &cs);
          req_complete(g.scratch_req[k], &cs, e.seq);
          e.aux++;
        }"""
_SHAPES: dict[str, tuple[str, str, str, str]] = {
    # name: (parameters, communicator expression or "NULL", before the call, after the call)
    "send": ("B:buf N:count H:dt I:dest I:tag H:comm E", "comm", "", """
      e.peer = world_of(g.cur, *dest);
      e.bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));
      e.tag = *tag;"""),
    "recv": ("B:buf N:count H:dt I:source I:tag H:comm S:status E", "comm", "", """
      fw_status_c(status, {F08}, &cs);
      status_fill(&e, &cs);
      e.aux = posted_any(*source, *tag);"""),
    "isend": ("B:buf N:count H:dt I:dest I:tag H:comm H:req E", "comm", "", """
      e.peer = world_of(g.cur, *dest);
      e.bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));
      e.tag = *tag;
      e.req = req_add(PMPI_Request_f2c(*req), {PERSIST}, 0, e.peer, *tag, e.bytes);"""),
    "irecv": ("B:buf N:count H:dt I:source I:tag H:comm H:req E", "comm", "", """
      e.peer = world_of(g.cur, *source);
      e.recv_bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));
      e.tag = *tag;
      e.req = req_add(PMPI_Request_f2c(*req), {PERSIST}, 1, e.peer, *tag, e.recv_bytes);"""),
    "sendrecv": ("B:sbuf N:scount H:stype I:dest I:stag B:rbuf N:rcount H:rtype I:source I:rtag "
                 "H:comm S:status E", "comm", "", """
      fw_status_c(status, {F08}, &cs);
      status_fill(&e, &cs);
      e.recv_peer = e.peer;
      e.peer = world_of(g.cur, *dest);
      e.bytes = type_bytes(fw_n(scount, {L}), PMPI_Type_f2c(*stype));
      e.tag = *stag;
      e.aux = posted_any(*source, *rtag);"""),
    "sendrecv_replace": ("B:buf N:count H:dt I:dest I:stag I:source I:rtag H:comm S:status E",
                         "comm", "", """
      fw_status_c(status, {F08}, &cs);
      status_fill(&e, &cs);
      e.recv_peer = e.peer;
      e.peer = world_of(g.cur, *dest);
      e.bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));
      e.tag = *stag;
      e.aux = posted_any(*source, *rtag);"""),
    "isendrecv": ("B:sbuf N:scount H:stype I:dest I:stag B:rbuf N:rcount H:rtype I:source I:rtag "
                  "H:comm H:req E", "comm", "", """
      e.peer = world_of(g.cur, *dest);
      e.recv_peer = world_of(g.cur, *source);
      e.bytes = type_bytes(fw_n(scount, {L}), PMPI_Type_f2c(*stype));
      e.recv_bytes = type_bytes(fw_n(rcount, {L}), PMPI_Type_f2c(*rtype));
      e.tag = *stag;
      e.req = req_add(PMPI_Request_f2c(*req), 0, 2, e.recv_peer, *rtag, e.recv_bytes);"""),
    "isendrecv_replace": ("B:buf N:count H:dt I:dest I:stag I:source I:rtag H:comm H:req E",
                          "comm", "", """
      e.peer = world_of(g.cur, *dest);
      e.recv_peer = world_of(g.cur, *source);
      e.bytes = e.recv_bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));
      e.tag = *stag;
      e.req = req_add(PMPI_Request_f2c(*req), 0, 2, e.recv_peer, *rtag, e.recv_bytes);"""),
    "probe": ("I:source I:tag H:comm S:status E", "comm", "", """
      fw_status_c(status, {F08}, &cs);
      status_fill(&e, &cs);"""),
    "mprobe": ("I:source I:tag H:comm H:msg S:status E", "comm", "", """
      fw_status_c(status, {F08}, &cs);
      status_fill(&e, &cs);
      matched_add(PMPI_Message_f2c(*msg), g.cur);"""),
    "mrecv": ("B:buf N:count H:dt H:msg S:status E", "NULL", """
      comm_entry *mc = tr ? matched_take(PMPI_Message_f2c(*msg)) : NULL;""", """
      g.cur = mc;
      e.comm = mc ? mc->id : -1;
      fw_status_c(status, {F08}, &cs);
      status_fill(&e, &cs);"""),
    "imrecv": ("B:buf N:count H:dt H:msg H:req E", "NULL", """
      comm_entry *mc = tr ? matched_take(PMPI_Message_f2c(*msg)) : NULL;""", """
      g.cur = mc;
      e.comm = mc ? mc->id : -1;
      e.recv_bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));
      e.req = req_add(PMPI_Request_f2c(*req), 0, 1, PEER_ANY, -1, e.recv_bytes);"""),
    "start": ("H:req E", "NULL", """
      if (tr) fw_name_request(&e, PMPI_Request_f2c(*req), 1);""", ""),
    "startall": ("I:count X:reqs E", "NULL", """
      if (tr) {
        MPI_Fint *fr = reqs;
        e.aux = *count;
        for (int i = 0; i < *count; i++) {
          req_entry *r = req_find(PMPI_Request_f2c(fr[i]), 0);
          if (!r) continue;
          r->active = 1;
          lists_write(e.seq, LIST_STARTED, 1, &r->id);
        }
      }""", ""),
    "cancel": ("H:req E", "NULL", """
      if (tr) fw_name_request(&e, PMPI_Request_f2c(*req), 0);""", ""),
    "request_free": ("H:req E", "NULL", """
      if (tr) {
        req_entry *r = req_find(PMPI_Request_f2c(*req), 0);
        if (r) {
          e.req = r->id;
          r->state = 2;
        }
      }""", ""),
    "wait": ("H:req S:status E", "NULL", """
      MPI_Request h = tr ? PMPI_Request_f2c(*req) : MPI_REQUEST_NULL;""", """
      if (h != MPI_REQUEST_NULL) {
        fw_status_c(status, {F08}, &cs);
        req_complete(h, &cs, e.seq);
        e.aux = 1;
      }"""),
    "waitall": ("I:count X:reqs SA:statuses E", "NULL", """
      if (tr) fw_copy_requests(reqs, *count);""", """
      for (int i = 0; i < *count; i++)
        if (g.scratch_req[i] != MPI_REQUEST_NULL) {
          fw_status_c(fw_status_at(statuses, i, {F08}), {F08}, &cs);
          req_complete(g.scratch_req[i], &cs, e.seq);
          e.aux++;
        }"""),
    "waitany": ("I:count X:reqs I:index S:status E", "NULL", """
      if (tr) fw_copy_requests(reqs, *count);""", """
      int k = fw_any_index(reqs, *count, *index);
      if (k >= 0) {
        fw_status_c(status, {F08}, &cs);
        req_complete(g.scratch_req[k], &cs, e.seq);
        e.aux = 1;
      }"""),
    "waitsome": ("I:count X:reqs I:outcount X:indices SA:statuses E", "NULL", """
      if (tr) fw_copy_requests(reqs, *count);""", _SOME_COMPLETED),
    "barrier": ("H:comm E", "comm", "", ""),
    "ibarrier": ("H:comm H:req E", "comm", "", """
      e.req = req_add(PMPI_Request_f2c(*req), 0, 0, PEER_NONE, -1, 0);"""),
    "barrier_init": ("H:comm X:info H:req E", "comm", "", """
      e.req = req_add(PMPI_Request_f2c(*req), 1, 0, PEER_NONE, -1, 0);"""),
    "bcast": ("B:buf N:count H:dt I:root H:comm {REQ} E", "comm", "", """
      set_root(&e, *root);
      e.bytes = e.recv_bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));"""),
    "reduce": ("B:sbuf B:rbuf N:count H:dt X:op I:root H:comm {REQ} E", "comm", "", """
      set_root(&e, *root);
      e.bytes = e.recv_bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));"""),
    "allreduce": ("B:sbuf B:rbuf N:count H:dt X:op H:comm {REQ} E", "comm", "", """
      e.bytes = e.recv_bytes = type_bytes(fw_n(count, {L}), PMPI_Type_f2c(*dt));"""),
    "gather": ("B:sbuf N:scount H:stype B:rbuf N:rcount H:rtype {ROOT} H:comm {REQ} E", "comm",
               "", """
      {ROOT_SET}
      int r_in = fw_in_place(rbuf, {TS}), s_in = fw_in_place(sbuf, {TS});
      e.recv_bytes = r_in ? 0 : type_bytes(fw_n(rcount, {L}), PMPI_Type_f2c(*rtype));
      e.bytes = s_in ? e.recv_bytes : type_bytes(fw_n(scount, {L}), PMPI_Type_f2c(*stype));
      if (r_in) e.recv_bytes = e.bytes;
      {ROOT_ONLY}"""),
    "gatherv": ("B:sbuf N:scount H:stype B:rbuf NA:rcounts X:displs H:rtype {ROOT} H:comm {REQ} E",
                "comm", "", """
      int n = comm_size_of(g.cur), me = 0;
      {ROOT_SET}
      PMPI_Comm_rank(g.cur->handle, &me);
      MPI_Datatype rt = PMPI_Type_f2c(*rtype);
      if ({IS_ROOT}) {
        e.recv_bytes = vsum(n, rcounts, {L}, rt);
        vcounts_write(e.seq, LIST_RECV, n, rcounts, {L}, rt);
      }
      e.bytes = fw_in_place(sbuf, {TS}) ? type_bytes(fw_at(rcounts, me, {L}), rt)
                                        : type_bytes(fw_n(scount, {L}), PMPI_Type_f2c(*stype));"""),
    "scatterv": ("B:sbuf NA:scounts X:displs H:stype B:rbuf N:rcount H:rtype I:root H:comm {REQ} E",
                 "comm", "", """
      int n = comm_size_of(g.cur), me = 0;
      set_root(&e, *root);
      PMPI_Comm_rank(g.cur->handle, &me);
      if (me == *root) {
        MPI_Datatype st = PMPI_Type_f2c(*stype);
        e.bytes = vsum(n, scounts, {L}, st);
        vcounts_write(e.seq, LIST_SEND, n, scounts, {L}, st);
      }
      e.recv_bytes = fw_in_place(rbuf, {TS}) ? 0
                     : type_bytes(fw_n(rcount, {L}), PMPI_Type_f2c(*rtype));"""),
    "alltoallv": ("B:sbuf NA:scounts X:sdispls H:stype B:rbuf NA:rcounts X:rdispls H:rtype H:comm "
                  "{REQ} E", "comm", "", """
      int n = comm_size_of(g.cur);
      int inplace = fw_in_place(sbuf, {TS});
      MPI_Datatype rt = PMPI_Type_f2c(*rtype), st = inplace ? rt : PMPI_Type_f2c(*stype);
      e.recv_bytes = vsum(n, rcounts, {L}, rt);
      e.bytes = inplace ? e.recv_bytes : vsum(n, scounts, {L}, st);
      vcounts_write(e.seq, LIST_SEND, n, inplace ? (const void *)rcounts : (const void *)scounts,
                    {L}, st);
      vcounts_write(e.seq, LIST_RECV, n, rcounts, {L}, rt);"""),
    "alltoallw": ("B:sbuf NA:scounts X:sdispls X:stypes B:rbuf NA:rcounts X:rdispls X:rtypes "
                  "H:comm {REQ} E", "comm", "", """
      int n = comm_size_of(g.cur);
      int64_t sent = 0, received = 0;
      MPI_Datatype *rt = fw_types(rtypes, n), *st = NULL;
      if (fw_in_place(sbuf, {TS})) {
        wcounts_write(e.seq, LIST_SEND, n, rcounts, {L}, rt, &sent);
      } else {
        st = fw_types(stypes, n);
        wcounts_write(e.seq, LIST_SEND, n, scounts, {L}, st, &sent);
      }
      wcounts_write(e.seq, LIST_RECV, n, rcounts, {L}, rt, &received);
      free(rt);
      free(st);
      e.bytes = sent;
      e.recv_bytes = received;"""),
    "reduce_scatter": ("B:sbuf B:rbuf NA:rcounts H:dt X:op H:comm {REQ} E", "comm", "", """
      int n = comm_size_of(g.cur), me = 0;
      MPI_Datatype t = PMPI_Type_f2c(*dt);
      PMPI_Comm_rank(g.cur->handle, &me);
      e.bytes = vsum(n, rcounts, {L}, t);
      e.recv_bytes = type_bytes(fw_at(rcounts, me, {L}), t);
      vcounts_write(e.seq, LIST_RECV, n, rcounts, {L}, t);"""),
    "nbr_block": ("B:sbuf N:scount H:stype B:rbuf N:rcount H:rtype H:comm {REQ} E", "comm", "",
                  """
      neighbor_record(&e, g.cur->handle, UNIFORM(fw_n(scount, {L}), PMPI_Type_f2c(*stype)),
                      UNIFORM(fw_n(rcount, {L}), PMPI_Type_f2c(*rtype)));"""),
    "nbr_allgatherv": ("B:sbuf N:scount H:stype B:rbuf NA:rcounts X:displs H:rtype H:comm {REQ} E",
                       "comm", "", """
      neighbor_record(&e, g.cur->handle, UNIFORM(fw_n(scount, {L}), PMPI_Type_f2c(*stype)),
                      VECTOR(rcounts, {L}, PMPI_Type_f2c(*rtype)));"""),
    "nbr_alltoallv": ("B:sbuf NA:scounts X:sdispls H:stype B:rbuf NA:rcounts X:rdispls H:rtype "
                      "H:comm {REQ} E", "comm", "", """
      neighbor_record(&e, g.cur->handle, VECTOR(scounts, {L}, PMPI_Type_f2c(*stype)),
                      VECTOR(rcounts, {L}, PMPI_Type_f2c(*rtype)));"""),
    "nbr_alltoallw": ("B:sbuf NA:scounts X:sdispls X:stypes B:rbuf NA:rcounts X:rdispls X:rtypes "
                      "H:comm {REQ} E", "comm", "", """
      int64_t *src = NULL, *dst = NULL;
      int ns = 0, nd = 0;
      if (topo_neighbors(g.cur->handle, &src, &ns, &dst, &nd)) { /* for the types' lengths */
        MPI_Datatype *st = fw_types(stypes, nd), *rt = fw_types(rtypes, ns);
        neighbor_record(&e, g.cur->handle, TYPED(scounts, {L}, st), TYPED(rcounts, {L}, rt));
        free(st);
        free(rt);
      }
      free(src);
      free(dst);"""),
    "win_create": ("B:base X:size X:disp_unit X:info H:comm H:win E", "comm", "", """
      win_add(&e, PMPI_Win_f2c(*win));"""),
    "win_allocate": ("X:size X:disp_unit X:info H:comm X:baseptr H:win E", "comm", "", """
      win_add(&e, PMPI_Win_f2c(*win));"""),
    "win_create_dynamic": ("X:info H:comm H:win E", "comm", "", """
      win_add(&e, PMPI_Win_f2c(*win));"""),
    "win_free": ("H:win E", "WIN", """
      struct win_entry *we = tr ? win_get(PMPI_Win_f2c(*win)) : NULL;""", """
      if (we) memset(&we->handle, 0xff, sizeof we->handle); /* the handle may be reused */"""),
    "win_sync": ("H:win E", "WIN", "", ""),  # no target: peer stays PEER_NONE
    "win_sync_assert": ("I:assert H:win E", "WIN", "", ""),  # no target: peer stays PEER_NONE
    "win_sync_rank": ("I:rank H:win E", "WIN", "", """
      e.peer = world_of(g.cur, *rank);"""),
    "win_lock": ("I:lock_type I:rank I:assert H:win E", "WIN", "", """
      e.peer = world_of(g.cur, *rank);"""),
    "win_test": ("H:win X:flag E", "WIN", "", """
      e.aux = *(MPI_Fint *)flag != 0;"""),
    "win_group": ("H:group I:assert H:win E", "WIN", "", """
      group_record(&e, PMPI_Group_f2c(*group));"""),
    "put": ("B:origin N:ocount H:otype I:target X:tdisp N:tcount H:ttype H:win {REQ} E", "WIN",
            "", """
      e.peer = world_of(g.cur, *target);
      e.bytes = type_bytes(fw_n(ocount, {L}), PMPI_Type_f2c(*otype));"""),
    "get": ("B:origin N:ocount H:otype I:target X:tdisp N:tcount H:ttype H:win {REQ} E", "WIN",
            "", """
      e.peer = world_of(g.cur, *target);
      e.recv_bytes = type_bytes(fw_n(ocount, {L}), PMPI_Type_f2c(*otype));"""),
    "accumulate": ("B:origin N:ocount H:otype I:target X:tdisp N:tcount H:ttype X:op H:win {REQ} "
                   "E", "WIN", "", """
      e.peer = world_of(g.cur, *target);
      e.bytes = type_bytes(fw_n(ocount, {L}), PMPI_Type_f2c(*otype));"""),
    "get_accumulate": ("B:origin N:ocount H:otype B:result N:rcount H:rtype I:target X:tdisp "
                       "N:tcount H:ttype X:op H:win {REQ} E", "WIN", "", """
      e.peer = world_of(g.cur, *target);
      e.bytes = type_bytes(fw_n(ocount, {L}), PMPI_Type_f2c(*otype));
      e.recv_bytes = type_bytes(fw_n(rcount, {L}), PMPI_Type_f2c(*rtype));"""),
    "fetch_and_op": ("B:origin B:result H:dt I:target X:tdisp X:op H:win E", "WIN", "", """
      e.peer = world_of(g.cur, *target);
      e.bytes = e.recv_bytes = type_bytes(1, PMPI_Type_f2c(*dt));"""),
    "compare_and_swap": ("B:origin B:compare B:result H:dt I:target X:tdisp H:win E", "WIN", "",
                         """
      e.peer = world_of(g.cur, *target);
      e.bytes = type_bytes(2, PMPI_Type_f2c(*dt)); /* origin and compare values out */
      e.recv_bytes = type_bytes(1, PMPI_Type_f2c(*dt));"""),
    "graph_create": ("H:comm I:nnodes X:index X:edges I:reorder H:newcomm E", "comm", "", _NEWCOMM),
    "dist_graph_create": ("H:comm I:n X:sources X:degrees X:destinations X:weights X:info "
                          "I:reorder H:newcomm E", "comm", "", _NEWCOMM),
    "dist_graph_create_adjacent": ("H:comm I:indegree X:sources X:sourceweights I:outdegree "
                                   "X:destinations X:destweights X:info I:reorder H:newcomm E",
                                   "comm", "", _NEWCOMM),
    "comm_split": ("H:comm I:color I:key H:newcomm E", "comm", "", _NEWCOMM),
    "comm_split_type": ("H:comm I:type I:key X:info H:newcomm E", "comm", "", _NEWCOMM),
    "comm_create": ("H:comm X:group H:newcomm E", "comm", "", _NEWCOMM),
    "comm_create_group": ("H:comm X:group I:tag H:newcomm E", "comm", "", _NEWCOMM),
    "comm_dup": ("H:comm H:newcomm E", "comm", "", _NEWCOMM),
    "cart_create": ("H:comm I:ndims X:dims X:periods I:reorder H:newcomm E", "comm", "", _NEWCOMM),
    "cart_sub": ("H:comm X:remain H:newcomm E", "comm", "", _NEWCOMM),
    "comm_free": ("H:comm E", "comm", """
      comm_entry *freed = tr ? g.cur : NULL;""", """
      if (freed) freed->handle = MPI_COMM_NULL; /* the handle may be reused */"""),
}

#: Polling calls (a loop of them is held as one event, see poll_end in sigex_trace.c):
#: parameters, poll key (two C expressions), communicator, after-the-call C.
_POLLS: dict[str, tuple[str, str, str, str, str]] = {
    "test": ("H:req X:flag S:status E", "(uintptr_t)req", "0", "NULL", """
      MPI_Request h = tr ? PMPI_Request_f2c(*req) : MPI_REQUEST_NULL;""", """
      if (*(MPI_Fint *)flag && h != MPI_REQUEST_NULL) {
        fw_status_c(status, {F08}, &cs);
        req_complete(h, &cs, e.seq);
        e.aux = 1;
      }"""),
    "testall": ("I:count X:reqs X:flag SA:statuses E", "(uintptr_t)reqs", "*count", "NULL", """
      if (tr) fw_copy_requests(reqs, *count);""", """
      if (*(MPI_Fint *)flag)
        for (int i = 0; i < *count; i++)
          if (g.scratch_req[i] != MPI_REQUEST_NULL) {
            fw_status_c(fw_status_at(statuses, i, {F08}), {F08}, &cs);
            req_complete(g.scratch_req[i], &cs, e.seq);
            e.aux++;
          }"""),
    "testany": ("I:count X:reqs I:index X:flag S:status E", "(uintptr_t)reqs", "*count", "NULL", """
      if (tr) fw_copy_requests(reqs, *count);""", """
      int k = *(MPI_Fint *)flag ? fw_any_index(reqs, *count, *index) : -1;
      if (k >= 0) {
        fw_status_c(status, {F08}, &cs);
        req_complete(g.scratch_req[k], &cs, e.seq);
        e.aux = 1;
      }"""),
    "testsome": ("I:count X:reqs I:outcount X:indices SA:statuses E", "(uintptr_t)reqs", "*count",
                 "NULL", """
      if (tr) fw_copy_requests(reqs, *count);""", _SOME_COMPLETED),
    "iprobe": ("I:source I:tag H:comm X:flag S:status E", "comm_key(c)", "PROBE_KEY(*source, *tag)",
               "comm", "", """
      e.aux = *(MPI_Fint *)flag != 0;
      if (e.aux) {
        fw_status_c(status, {F08}, &cs);
        status_fill(&e, &cs);
      } else {
        e.peer = world_of(g.cur, *source);
      }"""),
    "improbe": ("I:source I:tag H:comm X:flag H:msg S:status E", "comm_key(c)",
                "PROBE_KEY(*source, *tag)", "comm", "", """
      e.aux = *(MPI_Fint *)flag != 0;
      if (e.aux) {
        fw_status_c(status, {F08}, &cs);
        status_fill(&e, &cs);
        matched_add(PMPI_Message_f2c(*msg), g.cur);
      } else {
        e.peer = world_of(g.cur, *source);
      }"""),
}

#: Every function the tracer models, as "Name shape OP_CODE [variant...]": the variants say
#: nonblocking (a request argument), persistent (a persistent request), persistent_collective
#: (an info and a persistent request: MPI-4's *_init), and for the gather family whose counts
#: count (gather_root, scatter_root: a root argument).
_TABLE = """
Send send OP_SEND
Ssend send OP_SSEND
Bsend send OP_BSEND
Rsend send OP_RSEND
Recv recv OP_RECV
Isend isend OP_ISEND
Issend isend OP_ISSEND
Ibsend isend OP_IBSEND
Irsend isend OP_IRSEND
Send_init isend OP_SEND_INIT persistent
Ssend_init isend OP_SSEND_INIT persistent
Bsend_init isend OP_BSEND_INIT persistent
Rsend_init isend OP_RSEND_INIT persistent
Irecv irecv OP_IRECV
Recv_init irecv OP_RECV_INIT persistent
Sendrecv sendrecv OP_SENDRECV
Sendrecv_replace sendrecv_replace OP_SENDRECV_REPLACE
Isendrecv isendrecv OP_ISENDRECV
Isendrecv_replace isendrecv_replace OP_ISENDRECV_REPLACE
Probe probe OP_PROBE
Iprobe iprobe OP_IPROBE
Mprobe mprobe OP_MPROBE
Improbe improbe OP_IMPROBE
Mrecv mrecv OP_MRECV
Imrecv imrecv OP_IMRECV
Start start OP_START
Startall startall OP_STARTALL
Cancel cancel OP_CANCEL
Request_free request_free OP_REQUEST_FREE
Wait wait OP_WAIT
Waitall waitall OP_WAITALL
Waitany waitany OP_WAITANY
Waitsome waitsome OP_WAITSOME
Test test OP_TEST
Testall testall OP_TESTALL
Testany testany OP_TESTANY
Testsome testsome OP_TESTSOME
Barrier barrier OP_BARRIER
Ibarrier ibarrier OP_IBARRIER
Bcast bcast OP_BCAST
Ibcast bcast OP_IBCAST nonblocking
Reduce reduce OP_REDUCE
Ireduce reduce OP_IREDUCE nonblocking
Allreduce allreduce OP_ALLREDUCE
Iallreduce allreduce OP_IALLREDUCE nonblocking
Scan allreduce OP_SCAN
Iscan allreduce OP_ISCAN nonblocking
Exscan allreduce OP_EXSCAN
Iexscan allreduce OP_IEXSCAN nonblocking
Reduce_scatter_block allreduce OP_REDUCE_SCATTER_BLOCK
Ireduce_scatter_block allreduce OP_IREDUCE_SCATTER_BLOCK nonblocking
Gather gather OP_GATHER gather_root
Igather gather OP_IGATHER gather_root nonblocking
Scatter gather OP_SCATTER scatter_root
Iscatter gather OP_ISCATTER scatter_root nonblocking
Allgather gather OP_ALLGATHER
Iallgather gather OP_IALLGATHER nonblocking
Alltoall gather OP_ALLTOALL
Ialltoall gather OP_IALLTOALL nonblocking
Gatherv gatherv OP_GATHERV gather_root
Igatherv gatherv OP_IGATHERV gather_root nonblocking
Allgatherv gatherv OP_ALLGATHERV
Iallgatherv gatherv OP_IALLGATHERV nonblocking
Scatterv scatterv OP_SCATTERV
Iscatterv scatterv OP_ISCATTERV nonblocking
Alltoallv alltoallv OP_ALLTOALLV
Ialltoallv alltoallv OP_IALLTOALLV nonblocking
Alltoallw alltoallw OP_ALLTOALLW
Ialltoallw alltoallw OP_IALLTOALLW nonblocking
Reduce_scatter reduce_scatter OP_REDUCE_SCATTER
Ireduce_scatter reduce_scatter OP_IREDUCE_SCATTER nonblocking
Barrier_init barrier_init OP_BARRIER_INIT
Bcast_init bcast OP_BCAST_INIT persistent_collective
Reduce_init reduce OP_REDUCE_INIT persistent_collective
Allreduce_init allreduce OP_ALLREDUCE_INIT persistent_collective
Scan_init allreduce OP_SCAN_INIT persistent_collective
Exscan_init allreduce OP_EXSCAN_INIT persistent_collective
Reduce_scatter_block_init allreduce OP_REDUCE_SCATTER_BLOCK_INIT persistent_collective
Gather_init gather OP_GATHER_INIT gather_root persistent_collective
Scatter_init gather OP_SCATTER_INIT scatter_root persistent_collective
Allgather_init gather OP_ALLGATHER_INIT persistent_collective
Alltoall_init gather OP_ALLTOALL_INIT persistent_collective
Gatherv_init gatherv OP_GATHERV_INIT gather_root persistent_collective
Allgatherv_init gatherv OP_ALLGATHERV_INIT persistent_collective
Scatterv_init scatterv OP_SCATTERV_INIT persistent_collective
Alltoallv_init alltoallv OP_ALLTOALLV_INIT persistent_collective
Alltoallw_init alltoallw OP_ALLTOALLW_INIT persistent_collective
Reduce_scatter_init reduce_scatter OP_REDUCE_SCATTER_INIT persistent_collective
Neighbor_allgather nbr_block OP_NEIGHBOR_ALLGATHER
Ineighbor_allgather nbr_block OP_INEIGHBOR_ALLGATHER nonblocking
Neighbor_allgather_init nbr_block OP_NEIGHBOR_ALLGATHER_INIT persistent_collective
Neighbor_allgatherv nbr_allgatherv OP_NEIGHBOR_ALLGATHERV
Ineighbor_allgatherv nbr_allgatherv OP_INEIGHBOR_ALLGATHERV nonblocking
Neighbor_allgatherv_init nbr_allgatherv OP_NEIGHBOR_ALLGATHERV_INIT persistent_collective
Neighbor_alltoall nbr_block OP_NEIGHBOR_ALLTOALL
Ineighbor_alltoall nbr_block OP_INEIGHBOR_ALLTOALL nonblocking
Neighbor_alltoall_init nbr_block OP_NEIGHBOR_ALLTOALL_INIT persistent_collective
Neighbor_alltoallv nbr_alltoallv OP_NEIGHBOR_ALLTOALLV
Ineighbor_alltoallv nbr_alltoallv OP_INEIGHBOR_ALLTOALLV nonblocking
Neighbor_alltoallv_init nbr_alltoallv OP_NEIGHBOR_ALLTOALLV_INIT persistent_collective
Neighbor_alltoallw nbr_alltoallw OP_NEIGHBOR_ALLTOALLW
Ineighbor_alltoallw nbr_alltoallw OP_INEIGHBOR_ALLTOALLW nonblocking
Neighbor_alltoallw_init nbr_alltoallw OP_NEIGHBOR_ALLTOALLW_INIT persistent_collective
Win_create win_create OP_WIN_CREATE
Win_allocate win_allocate OP_WIN_CREATE
Win_allocate_shared win_allocate OP_WIN_CREATE
Win_create_dynamic win_create_dynamic OP_WIN_CREATE
Win_free win_free OP_WIN_FREE
Win_fence win_sync_assert OP_WIN_FENCE
Win_lock win_lock OP_WIN_LOCK
Win_unlock win_sync_rank OP_WIN_UNLOCK
Win_lock_all win_sync_assert OP_WIN_LOCK_ALL
Win_unlock_all win_sync OP_WIN_UNLOCK_ALL
Win_flush win_sync_rank OP_WIN_FLUSH
Win_flush_local win_sync_rank OP_WIN_FLUSH_LOCAL
Win_flush_all win_sync OP_WIN_FLUSH_ALL
Win_flush_local_all win_sync OP_WIN_FLUSH_LOCAL_ALL
Win_sync win_sync OP_WIN_SYNC
Win_complete win_sync OP_WIN_COMPLETE
Win_wait win_sync OP_WIN_WAIT
Win_test win_test OP_WIN_TEST
Win_post win_group OP_WIN_POST
Win_start win_group OP_WIN_START
Put put OP_PUT
Get get OP_GET
Accumulate accumulate OP_ACCUMULATE
Get_accumulate get_accumulate OP_GET_ACCUMULATE
Rput put OP_RPUT nonblocking
Rget get OP_RGET nonblocking
Raccumulate accumulate OP_RACCUMULATE nonblocking
Rget_accumulate get_accumulate OP_RGET_ACCUMULATE nonblocking
Fetch_and_op fetch_and_op OP_FETCH_AND_OP
Compare_and_swap compare_and_swap OP_COMPARE_AND_SWAP
Graph_create graph_create OP_GRAPH_CREATE
Dist_graph_create dist_graph_create OP_DIST_GRAPH_CREATE
Dist_graph_create_adjacent dist_graph_create_adjacent OP_DIST_GRAPH_CREATE
Comm_split comm_split OP_COMM_SPLIT
Comm_split_type comm_split_type OP_COMM_SPLIT_TYPE
Comm_create comm_create OP_COMM_CREATE
Comm_create_group comm_create_group OP_COMM_CREATE_GROUP
Comm_dup comm_dup OP_COMM_DUP
Cart_create cart_create OP_CART_CREATE
Cart_sub cart_sub OP_CART_SUB
Comm_free comm_free OP_COMM_FREE
Init init OP_INIT
Init_thread init_thread OP_INIT
Finalize finalize OP_FINALIZE
Abort abort OP_ABORT
"""

#: Start and stop of the tracer: parameters and the whole body (``real`` is the library's).
_LIFECYCLE = {
    "init": ("E", """
  double t = wall_now();
  real(ierr);
  if (!g.tracing) /* MPICH's mpi_init_ goes through MPI_Init, which started it */
    tracer_start(t, MPI_THREAD_SINGLE);"""),
    "init_thread": ("I:required X:provided E", """
  double t = wall_now();
  real(required, provided, ierr);
  if (!g.tracing) tracer_start(t, *(MPI_Fint *)provided);"""),
    "finalize": ("E", """
  ev_t e;
  int tr = fw_on() && ev_begin(&e, OP_FINALIZE, MPI_COMM_WORLD);
  real(ierr);
  if (tr) {
    ev_end(&e);
    tracer_stop();
    fw_extra_write();
  }"""),
    "abort": ("H:comm I:errorcode E", """
  ev_t e;
  if (fw_on() && ev_begin(&e, OP_ABORT, PMPI_Comm_f2c(*comm))) {
    e.aux = *errorcode;
    ev_end(&e);
    g.tracing = 0;
    close_streams();
  }
  real(comm, errorcode, ierr);"""),
}

# The library's names of one function, by calling convention.  "classic": mpif.h and `use mpi`
# (and Open MPI's internal ompi_*_f, which its mpi_f08 layer calls); "f08": mpi_f08 with
# plain buffer addresses; "f08ts": MPICH's mpi_f08 with array-descriptor buffers; "_large":
# MPI_COUNT_KIND counts.  (f08, ts, large) per convention:
_CONVENTIONS = {
    "classic": (0, 0, 0),
    "f08": (1, 0, 0),
    "f08_large": (1, 0, 1),
    "f08ts": (1, 1, 0),
    "f08ts_large": (1, 1, 1),
}


def _symbol_names(name: str) -> dict[str, list[str]]:
    low = name.lower()
    return {
        "classic": [f"mpi_{low}_", f"mpi_{low}__", f"mpi_{low}", f"MPI_{name.upper()}",
                    f"ompi_{low}_f"],
        "f08": [f"mpi_{low}_f08_"],
        "f08_large": [f"mpi_{low}_f08_large_"],
        "f08ts": [f"mpi_{low}_f08ts_"],
        "f08ts_large": [f"mpi_{low}_f08ts_large_"],
    }


# Sentinels: data symbols whose address is the Fortran MPI_IN_PLACE / MPI_STATUS_IGNORE /
# MPI_STATUSES_IGNORE (Open MPI's common blocks, MPICH's mpi_f08 objects), and MPICH's pointer
# variables that hold the mpif.h one once Fortran MPI has started.
_SENTINELS = {
    "in_place": (re.compile(r"^(mpi_fortran_in_place_{0,2}|MPI_FORTRAN_IN_PLACE|"
                            r"MPIR_F08_MPI_IN_PLACE)$"), re.compile(r"^MPIR_F_MPI_IN_PLACE$")),
    "status_ignore": (re.compile(r"^(mpi_fortran_status_ignore_{0,2}|MPI_FORTRAN_STATUS_IGNORE|"
                                 r"MPIR_F08_MPI_STATUS_IGNORE_OBJ)$"), None),
    "statuses_ignore": (re.compile(r"^(mpi_fortran_statuses_ignore_{0,2}|"
                                   r"MPI_FORTRAN_STATUSES_IGNORE|"
                                   r"MPIR_F08_MPI_STATUSES_IGNORE_OBJ)$"), None),
}

_FORTRAN_LIB = re.compile(r"^lib(mpi_mpifh|mpi_usempif08|mpi_usempi_ignore_tkr|mpi_usempi|"
                          r"mpichfort|mpifort|fmpich|mpichf90)(-\w+)?\.so(\.\d+)*$")


def _dynamic_symbols(library: Path) -> dict[str, str]:
    """Defined dynamic symbols of a shared library: name -> nm type letter."""
    try:
        res = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                             text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return {}
    out = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[parts[2].split("@")[0]] = parts[1]
    return out


def _needed(library: Path) -> list[str]:
    try:
        res = subprocess.run(["objdump", "-p", str(library)], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln.split()[1] for ln in res.stdout.splitlines()
            if ln.strip().startswith("NEEDED") and len(ln.split()) == 2]


def fortran_libraries(library: Path | None) -> list[Path]:
    """The Fortran binding libraries installed beside an MPI's C library and linked to it
    (their ``NEEDED`` entries name its soname, directly or through another of them)."""
    if library is None or not shutil.which("nm") or not shutil.which("objdump"):
        return []
    library = Path(os.path.realpath(library))
    directory = library.parent
    c_names = {p.name for p in directory.iterdir()
               if p.name.startswith(library.name.split(".so")[0] + ".so")
               and os.path.realpath(p) == str(library)}
    found: dict[str, Path] = {}
    for p in sorted(directory.iterdir()):
        if _FORTRAN_LIB.match(p.name):
            found.setdefault(os.path.realpath(p), p)
    chosen, names = [], set(c_names)
    candidates = {real: _needed(Path(real)) for real in found}
    changed = True
    while changed:  # a library qualifies if it needs the C library or a qualified one
        changed = False
        for real, needed in candidates.items():
            if real not in chosen and names & set(needed):
                chosen.append(real)
                names |= {q.name for q in directory.iterdir()
                          if os.path.realpath(q) == real}
                changed = True
    return [Path(r) for r in chosen]


def wrapped_symbols(library: Path | None) -> dict[str, list[tuple[str, str]]]:
    """What :func:`wrappers` would wrap for an MPI: function -> [(convention, symbol)]."""
    exported: dict[str, str] = {}
    for lib in fortran_libraries(library):
        exported.update(_dynamic_symbols(lib))
    out: dict[str, list[tuple[str, str]]] = {}
    for line in _TABLE.strip().splitlines():
        name = line.split()[0]
        for conv, names in _symbol_names(name).items():
            if conv.endswith("large") and not _has_counts(line.split()[1]):
                continue
            for sym in names:
                if exported.get(sym) in ("T", "W"):
                    out.setdefault(name, []).append((conv, sym))
    return out


def _has_counts(shape: str) -> bool:
    """The shape has a count (or a window's disp_unit): MPI-4 gives it a large-count form."""
    params = " " + (_SHAPES.get(shape) or _POLLS.get(shape) or _LIFECYCLE.get(shape))[0]
    return " N:" in params or " NA:" in params or ":disp_unit" in params


# ---- code generation -------------------------------------------------------------------------

def _params(spec: str, large: int) -> list[tuple[str, str]]:
    """(C type, name) per parameter of a shape's parameter string."""
    count = "MPI_Count" if large else "MPI_Fint"
    out = []
    for item in spec.split():
        kind, _, name = item.partition(":")
        if kind == "E":
            out.append(("MPI_Fint *", "ierr"))
        elif kind == "N":
            out.append((f"{count} *", name))
        elif kind in ("I", "H"):
            out.append(("MPI_Fint *", name))
        else:  # B, NA, X, S, SA: opaque here, cast where read
            out.append(("void *", name))
    return out


def _expand(spec: str, variant: str) -> str:
    words = variant.split()
    req = "H:req" if "nonblocking" in words else "X:info H:req" \
        if "persistent_collective" in words else ""
    root = "gather_root" in words or "scatter_root" in words
    return spec.replace("{REQ}", req).replace("{ROOT}", "I:root" if root else "")


def _code(text: str, *, variant: str, f08: int, ts: int, large: int) -> str:
    words = variant.split()
    root = "gather_root" if "gather_root" in words else "scatter_root" if "scatter_root" in words \
        else None
    subs = {
        "{L}": str(large), "{TS}": str(ts), "{F08}": str(f08),
        "{PERSIST}": "1" if "persistent" in words else "0",
        "{ROOT_SET}": "set_root(&e, *root);" if root else "",
        "{IS_ROOT}": "me == *root" if root else "1",
        "{ROOT_ONLY}": {"gather_root": "if (not_root(*root)) e.recv_bytes = 0;",
                        "scatter_root": "if (not_root(*root)) e.bytes = 0;"}.get(root, ""),
    }
    for k, v in subs.items():
        text = text.replace(k, v)
    return text


def _status_params(params: list[tuple[str, str]]) -> list[str]:
    return [n for _, n in params if n in ("status", "statuses")]


def _impl(name: str, shape: str, opc: str, variant: str, conv: str) -> tuple[str, int]:
    """C of one function in one calling convention; returns (code, number of parameters)."""
    f08, ts, large = _CONVENTIONS[conv]
    fn = f"fw_{name.lower()}_{conv}"
    if shape in _LIFECYCLE:
        spec, body = _LIFECYCLE[shape]
        params = _params(spec, large)
        proto = ", ".join(f"{t}{n}" for t, n in params)
        rtype = ", ".join(["void *"] * len(params))
        return (f"static __attribute__((noinline)) void {fn}(void (*real)({rtype}), {proto}) "
                f"{{{body}\n}}\n", len(params))
    poll = shape in _POLLS
    if poll:
        spec, key1, key2, comm, pre, post = _POLLS[shape]
    else:
        spec, comm, pre, post = _SHAPES[shape]
    params = _params(_expand(spec, variant), large)
    proto = ", ".join(f"{t}{n}" for t, n in params)
    rtype = ", ".join(["void *"] * len(params))
    call_args = []
    for _, n in params:
        call_args.append(f"{n}_arg" if n in ("status", "statuses") else n)
    st_names = _status_params(params)
    lines = [f"static __attribute__((noinline)) void {fn}(void (*real)({rtype}), {proto}) {{",
             "  ev_t e;", "  MPI_Status cs;", "  (void)cs;"]
    comm_expr = "MPI_COMM_NULL" if comm == "NULL" else "PMPI_Comm_f2c(*comm)"
    begin = "ev_begin"
    if comm == "WIN":  # an event on a window: its communicator and id (win_begin)
        begin, comm_expr = "win_begin", "PMPI_Win_f2c(*win)"
    if poll:
        lines += ["  int fast = 0, tr = 0;",
                  "  MPI_Comm c = MPI_COMM_NULL;",
                  "  if (fw_on()) {",
                  f"    c = {comm_expr};",
                  "    (void)c;",
                  f"    fast = poll_same({opc}, {key1}, {key2});",
                  f"    tr = fast ? poll_begin(&e, {opc}, c) : ev_begin(&e, {opc}, c);",
                  "  }"]
    else:
        lines.append(f"  int tr = fw_on() && {begin}(&e, {opc}, {comm_expr});")
    for n in st_names:
        many = n == "statuses"
        helper = "fw_statuses_arg" if many else "fw_status_arg"
        extra = ", *count" if many else ""
        lines.append(f"  void *{n}_arg = tr ? {helper}({n}, {f08}{extra}) : {n};")
    if pre.strip():
        lines.append(_code(pre, variant=variant, f08=f08, ts=ts, large=large).strip("\n"))
    body = "\n".join(lines)
    body += f"\n  real({', '.join(call_args)});\n  if (tr) {{"
    for n in st_names:
        body += f"\n    {n} = {n}_arg; /* read the statuses the call wrote */"
    body += _code(post, variant=variant, f08=f08, ts=ts, large=large)
    if "nonblocking" in variant.split():
        body += "\n      " + _REQ_POST
    if "persistent_collective" in variant.split():
        body += "\n      " + _REQ_POST.replace("*req), 0,", "*req), 1,")
    if poll:
        body += f"\n    poll_end(&e, fast, {opc}, {key1}, {key2});\n  }}\n}}\n"
    else:
        body += "\n    ev_end(&e);\n  }\n}\n"
    return body, len(params)


_PROLOGUE = r"""/* generated by signature/_fortran.py: wrappers of this MPI's Fortran symbols
 * (mpif.h, `use mpi`, `use mpi_f08`) for the functions the tracer models.  Each
 * forwards to the library's own symbol (dlsym RTLD_NEXT) and records one event;
 * ev_begin marks the call in progress, so a Fortran layer that goes on to the C
 * entry points or to another wrapped name is not recorded twice. */
#include <dlfcn.h>

static inline int fw_on(void) { return g.tracing && !g.depth; }

static void *fw_real(const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) {
    fprintf(stderr, "sigex tracer: the MPI library's Fortran %s is not found after the tracer "
            "(dlsym: %s); load the tracer with LD_PRELOAD, as sigex trace does\n", name,
            dlerror());
    abort();
  }
  return p;
}

/* Fortran status sizes: mpif.h's MPI_STATUS_SIZE, and the mpi_f08 TYPE(MPI_Status). */
#ifdef MPI_F_STATUS_SIZE
#define FW_STATUS_INTS MPI_F_STATUS_SIZE
#else
#define FW_STATUS_INTS ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif
#ifdef FW_HAVE_F08_STATUS
#define FW_F08_STATUS_INTS ((int)(sizeof(MPI_F08_status) / sizeof(MPI_Fint)))
#else
#define FW_F08_STATUS_INTS FW_STATUS_INTS
#endif
#define FW_STATUS_STRIDE(f08) ((f08) ? FW_F08_STATUS_INTS : FW_STATUS_INTS)
#define FW_STATUS_MAX 32

static inline MPI_Count fw_n(const void *p, int large) {
  return large ? *(const MPI_Count *)p : (MPI_Count) * (const MPI_Fint *)p;
}

static inline MPI_Count fw_at(const void *p, int i, int large) {
  return large ? ((const MPI_Count *)p)[i] : (MPI_Count)((const MPI_Fint *)p)[i];
}

/* Sentinel addresses, resolved once from the names the library exports. */
static struct { int done; const void *addr[3][8]; int n[3]; void **ptr[3][4]; int np[3]; } fw_sent;
enum { FW_IN_PLACE = 0, FW_STATUS_IGNORE = 1, FW_STATUSES_IGNORE = 2 };

static void fw_sentinels(void) {
  for (int k = 0; k < 3; k++) {
    for (int i = 0; fw_sentinel_addr[k][i]; i++) {
      void *p = dlsym(RTLD_DEFAULT, fw_sentinel_addr[k][i]);
      if (p && fw_sent.n[k] < 8) fw_sent.addr[k][fw_sent.n[k]++] = p;
    }
    for (int i = 0; fw_sentinel_ptr[k][i]; i++) {
      void *p = dlsym(RTLD_DEFAULT, fw_sentinel_ptr[k][i]);
      if (p && fw_sent.np[k] < 4) fw_sent.ptr[k][fw_sent.np[k]++] = (void **)p;
    }
  }
  fw_sent.done = 1;
}

static int fw_is(int k, const void *p) {
  if (!p) return 0;
  if (!fw_sent.done) fw_sentinels();
  for (int i = 0; i < fw_sent.n[k]; i++)
    if (p == fw_sent.addr[k][i]) return 1;
  for (int i = 0; i < fw_sent.np[k]; i++)
    if (*fw_sent.ptr[k][i] && p == *fw_sent.ptr[k][i]) return 1;
  return 0;
}

/* MPI_IN_PLACE: the buffer's address, or for an array descriptor (MPICH's
 * mpi_f08 `ts` routines) its base address, which comes first. */
static int fw_in_place(const void *buf, int ts) {
  if (ts) buf = buf ? *(const void *const *)buf : NULL;
  return fw_is(FW_IN_PLACE, buf);
}

static int fw_status_ignored(const void *st, int f08) {
  if (st == (const void *)MPI_F_STATUS_IGNORE) return 1;
#ifdef FW_HAVE_F08_STATUS
  if (f08 && st == (const void *)MPI_F08_STATUS_IGNORE) return 1;
#endif
  (void)f08;
  return fw_is(FW_STATUS_IGNORE, st);
}

static int fw_statuses_ignored(const void *st, int f08) {
  if (st == (const void *)MPI_F_STATUSES_IGNORE) return 1;
#ifdef FW_HAVE_F08_STATUS
  if (f08 && st == (const void *)MPI_F08_STATUSES_IGNORE) return 1;
#endif
  (void)f08;
  return fw_is(FW_STATUSES_IGNORE, st);
}

/* Where the program ignores the status, the call writes into ours, which is read. */
static MPI_Fint fw_own_status[FW_STATUS_MAX];
static MPI_Fint *fw_own_statuses;
static int fw_own_n;

static void *fw_status_arg(void *st, int f08) {
  return fw_status_ignored(st, f08) ? (void *)fw_own_status : st;
}

static void *fw_statuses_arg(void *st, int f08, int n) {
  if (!fw_statuses_ignored(st, f08)) return st;
  if (n > fw_own_n) {
    fw_own_n = n > 64 ? n : 64;
    fw_own_statuses = realloc(fw_own_statuses,
                              sizeof(MPI_Fint) * (size_t)fw_own_n * (size_t)FW_STATUS_STRIDE(f08));
  }
  return fw_own_statuses;
}

static inline void *fw_status_at(void *sts, int i, int f08) {
  return (MPI_Fint *)sts + (size_t)i * (size_t)FW_STATUS_STRIDE(f08);
}

/* A Fortran status as a C one: PMPI_Status_f2c (the mpi_f08 status has the
 * mpif.h layout in Open MPI 4.1 and the C layout in MPICH, where both agree). */
static void fw_status_c(const void *st, int f08, MPI_Status *out) {
  memset(out, 0, sizeof *out);
  out->MPI_SOURCE = MPI_ANY_SOURCE;
  (void)f08;
  PMPI_Status_f2c((const MPI_Fint *)st, out);
}

/* Requests are copied before a Wait/Test, which sets completed ones to null. */
static void fw_copy_requests(const void *reqs, int n) {
  scratch_reserve(n);
  for (int i = 0; i < n; i++) g.scratch_req[i] = PMPI_Request_f2c(((const MPI_Fint *)reqs)[i]);
}

/* The request a Wait/Test "any" or "some" completed.  Fortran indices start at
 * 1, but MPICH 4.0's mpi_f08 Waitany/Waitsome/Testany/Testsome return C's
 * 0-based ones: the completed request is the one the call set to null (a
 * persistent one stays, and is then taken at the 1-based index). */
static int fw_nulled(const void *reqs, int i) {
  return g.scratch_req[i] != MPI_REQUEST_NULL &&
         PMPI_Request_f2c(((const MPI_Fint *)reqs)[i]) == MPI_REQUEST_NULL;
}

static int fw_done(const void *reqs, int n, int i) {
  if (i < 0 || i >= n || g.scratch_req[i] == MPI_REQUEST_NULL) return 0;
  if (fw_nulled(reqs, i)) return 1;
  req_entry *r = req_find(g.scratch_req[i], 0);
  return r && r->persistent;
}

static int fw_any_index(const void *reqs, int n, int index) {
  if (index == MPI_UNDEFINED) return -1;
  if (index - 1 >= 0 && index - 1 < n && fw_nulled(reqs, index - 1)) return index - 1;
  if (index >= 0 && index < n && fw_nulled(reqs, index)) return index;
  return fw_done(reqs, n, index - 1) ? index - 1 : -1;
}

static int fw_some_base(const void *reqs, int n, const void *indices, int out) {
  int one = 1, zero = 1;
  for (int i = 0; i < out; i++) {
    int k = ((const MPI_Fint *)indices)[i];
    one = one && fw_done(reqs, n, k - 1);
    zero = zero && fw_done(reqs, n, k);
  }
  return one || !zero ? 1 : 0;
}

static MPI_Datatype *fw_types(const void *types, int n) {
  MPI_Datatype *t = malloc(sizeof *t * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) t[i] = PMPI_Type_f2c(((const MPI_Fint *)types)[i]);
  return t;
}

/* The other functions: their Fortran symbols only count the calls and the time
 * inside them.  Those the tracer does not model at all count in the table of
 * the C counting wrappers generated by _build.py (found by name); those it
 * models in C only (FW_EXTRA_N of them, see fw_extra_names) count in a table of
 * their own unless the call reached the C wrapper, which recorded it (MPICH's
 * mpif.h layer), and are added to rank<r>.unmodelled at MPI_Finalize.  Fortran
 * passes every argument by reference (plus hidden string lengths), so one
 * forwarder of FW_FWD_N pointer-sized arguments serves them all; the Fortran
 * functions that return a value (MPI_WTIME, MPI_WTICK, MPI_AINT_ADD,
 * MPI_AINT_DIFF) are not wrapped. */
#include <strings.h>
#define FW_FWD_PARAMS                                                          \
  void *a0, void *a1, void *a2, void *a3, void *a4, void *a5, void *a6,        \
  void *a7, void *a8, void *a9, void *a10, void *a11, void *a12, void *a13,    \
  void *a14, void *a15, void *a16, void *a17, void *a18, void *a19
#define FW_FWD_ARGS                                                            \
  a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16,   \
  a17, a18, a19
typedef void (*fw_fwd_t)(FW_FWD_PARAMS);

static int fw_unmodelled_index(const char *name) {
#if SIGEX_UNMODELLED_N > 0
  for (int i = 0; i < SIGEX_UNMODELLED_N; i++)
    if (strncmp(unm_names[i], "MPI_", 4) == 0 && strcasecmp(unm_names[i] + 4, name) == 0)
      return i;
#endif
  (void)name;
  return -1;
}

static int64_t fw_extra_calls[FW_EXTRA_N + 1];
static double fw_extra_time[FW_EXTRA_N + 1];

/* Events written or polls held so far: a C wrapper recorded the call if it moved. */
static inline int64_t fw_recorded(void) { return g.nevents + poll.ev.repeat; }

static void fw_extra_write(void) {
  FILE *f = NULL;
  for (int i = 0; i < FW_EXTRA_N; i++) {
    if (!fw_extra_calls[i]) continue;
    if (!f) {
      char path[4200];
      snprintf(path, sizeof path, "%s/rank%d.unmodelled", g.dir, g.rank);
      if (!(f = fopen(path, "a"))) return;
    }
    fprintf(f, "%lld %.9f MPI_%s\n", (long long)fw_extra_calls[i], fw_extra_time[i],
            fw_extra_names[i]);
  }
  if (f) fclose(f);
}

/* A call made inside a counted one is not counted again: another forwarder
 * (Open MPI's mpi_put_f08_ calls ompi_put_f) sees fw_counting, a C counting
 * wrapper (MPICH's mpif.h layer) sees the call in progress (g.depth).  Only the
 * main thread counts (unm_begin), so fw_counting needs no lock. */
static int fw_counting;

#define FW_COUNTED(SYM, NAME, J)                                               \
  void SYM(FW_FWD_PARAMS) {                                                    \
    static void *real;                                                         \
    static int idx = -1;                                                       \
    if (!real) {                                                               \
      idx = fw_unmodelled_index(NAME);                                         \
      real = fw_real(#SYM);                                                    \
    }                                                                          \
    double t = 0;                                                              \
    int c = !fw_counting && unm_begin(&t);                                     \
    int64_t seen = c ? fw_recorded() : 0;                                      \
    if (c) fw_counting = 1;                                                    \
    if (c && idx >= 0) g.depth = 1;                                            \
    ((fw_fwd_t)real)(FW_FWD_ARGS);                                             \
    if (c) fw_counting = 0;                                                    \
    if (c && idx >= 0) {                                                       \
      g.depth = 0;                                                             \
      unm_end(idx, t);                                                         \
    } else if (c && fw_recorded() == seen) {                                   \
      fw_extra_calls[J]++;                                                     \
      fw_extra_time[J] += wall_now() - t;                                      \
    }                                                                          \
  }

/* Start and Cancel name the request they act on. */
static void fw_name_request(ev_t *e, MPI_Request h, int start) {
  req_entry *r = req_find(h, 0);
  if (!r) return;
  if (start) r->active = 1;
  e->req = r->id;
  e->peer = r->peer;
  e->tag = r->tag;
  if (start) {
    if (r->is_recv) e->recv_bytes = r->bytes;
    else e->bytes = r->bytes;
  }
  e->comm = r->comm ? r->comm->id : -1;
}
"""


def _sentinel_tables(data_symbols: set[str]) -> str:
    addr, ptr = [], []
    for key in ("in_place", "status_ignore", "statuses_ignore"):
        a_re, p_re = _SENTINELS[key]
        addr.append(sorted(s for s in data_symbols if a_re.match(s)))
        ptr.append(sorted(s for s in data_symbols if p_re and p_re.match(s)))

    def table(name: str, rows: list[list[str]], width: int) -> str:
        body = ",\n".join("  {" + ", ".join([f'"{s}"' for s in row[:width - 1]] + ["NULL"]) + "}"
                          for row in rows)
        return f"static const char *const {name}[3][{width}] = {{\n{body}\n}};\n"

    return table("fw_sentinel_addr", addr, 9) + table("fw_sentinel_ptr", ptr, 5)


#: Fortran functions (not subroutines): they return a value, which the forwarder would lose.
_FORTRAN_FUNCTIONS = {"wtime", "wtick", "aint_add", "aint_diff"}


def _counted_symbols(symbols: dict[str, str], library: Path | None) -> list[tuple[str, str]]:
    """(Fortran symbol, C name without ``MPI_``) of every exported Fortran entry point of a
    function the library also exports as ``PMPI_<name>`` and the tracer does not model."""
    from ._build import _NOT_COUNTED
    if library is None:
        return []
    modelled = {line.split()[0].lower() for line in _TABLE.strip().splitlines()}
    out = []
    for c_name in sorted(_dynamic_symbols(Path(library))):
        if not c_name.startswith("PMPI_"):
            continue
        name = c_name[5:]
        low = name.lower()
        if (low in modelled or low in _FORTRAN_FUNCTIONS or low.endswith("_c")
                or _NOT_COUNTED.match("MPI_" + name)):
            continue
        for names in _symbol_names(name).values():
            out += [(sym, name) for sym in names if symbols.get(sym) in ("T", "W")]
    return out


def _has_f08_status(mpicc: str, build_dir: Path) -> bool:
    probe = build_dir / "fw_probe.c"
    probe.write_text("#include <mpi.h>\nint main(void) { MPI_F08_status *p = "
                     "MPI_F08_STATUS_IGNORE; return p == MPI_F08_STATUSES_IGNORE; }\n")
    try:
        res = subprocess.run([mpicc, "-c", "-o", str(build_dir / "fw_probe.o"), str(probe)],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0


def wrappers(mpicc: str, library: Path | None, build_dir: Path) -> Path | None:
    """The generated C file of Fortran wrappers for this MPI, or None.

    Parameters
    ----------
    mpicc : str
        The MPI's C compiler wrapper (to ask whether ``mpi.h`` has ``MPI_F08_status``).
    library : Path or None
        The MPI's C library (``libmpi.so.40``, ``libmpich.so.12``); its Fortran binding
        libraries are looked for beside it.
    build_dir : Path
        Where to write the file.

    Returns
    -------
    Path or None
        None when the MPI has no Fortran libraries (the PyPI MPICH) or they export none
        of the names wrapped here.
    """
    libs = fortran_libraries(library)
    if not libs:
        return None
    symbols: dict[str, str] = {}
    for lib in libs:
        symbols.update(_dynamic_symbols(lib))
    data = {s for s, t in symbols.items() if t in ("B", "D", "C", "V", "G", "S")}
    if library is not None:
        data |= {s for s, t in _dynamic_symbols(Path(library)).items()
                 if t in ("B", "D", "C", "V", "G", "S")}
    impls, entries, wrapped = [], [], []
    for line in _TABLE.strip().splitlines():
        name, shape, opc, *rest = line.split()
        variant = " ".join(rest)
        for conv, names in _symbol_names(name).items():
            if conv.endswith("large") and not _has_counts(shape):
                continue
            present = [s for s in names if symbols.get(s) in ("T", "W")]
            if not present:
                continue
            code, nparams = _impl(name, shape, opc, variant, conv)
            impls.append(code)
            fn = f"fw_{name.lower()}_{conv}"
            args = ", ".join(f"void *a{i}" for i in range(nparams))
            call = ", ".join(f"a{i}" for i in range(nparams))
            ftype = f"void (*)({', '.join(['void *'] * nparams)})"
            for sym in present:
                entries.append((sym,
                                f"void {sym}({args}) {{\n  static void *real;\n"
                                f"  if (!real) real = fw_real(\"{sym}\");\n"
                                f"  {fn}(({ftype})real, {call});\n}}"))
                wrapped.append(sym)
    counted = _counted_symbols(symbols, library)
    if not wrapped and not counted:
        return None
    names = sorted({name for _, name in counted})
    slot = {name: j for j, name in enumerate(names)}
    entries += [(sym, f'FW_COUNTED({sym}, "{name}", {slot[name]})') for sym, name in counted]
    out = build_dir / "sigex_fortran_wrappers.c"
    head = []
    if _has_f08_status(mpicc, build_dir):
        head.append("#define FW_HAVE_F08_STATUS 1")
    head.append(f"/* Fortran libraries: {' '.join(str(p) for p in libs)} */")
    head.append(f"/* {len(wrapped)} symbols recorded, {len(counted)} counted */")
    head.append(f"#define FW_EXTRA_N {len(names)}")
    head.append("static const char *const fw_extra_names[FW_EXTRA_N + 1] = {"
                + "".join(f'"{n}", ' for n in names) + "NULL};")
    # a name that mpi.h defines as a macro (an upper-case callback's, say) is left alone
    text = "\n".join(head) + "\n" + _sentinel_tables(data) + _PROLOGUE + "\n" + "\n".join(impls) \
        + "\n" + "\n".join(f"#ifndef {sym}\n{code}\n#endif\n" for sym, code in entries)
    out.write_text(text)
    return out
