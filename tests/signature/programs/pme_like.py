"""Particle ranks and PME-like server ranks in lock step (every third rank serves the two
before it). Each step a particle rank sends its server its coordinates (tag 7; the last
of the two first sends flags, tag 9), exchanges halos with the other particle ranks on
their own communicator, and receives its forces (tag 0); the server receives the flags
with Recv, the coordinates with Irecv, computes, and sends the forces back. Particle
ranks 1 and 3 send set-up sized coordinates in the first step: their own loops are found
from the next call on. A last step sends the shutdown flags and coordinates."""
import sys
import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
r, P = world.Get_rank(), world.Get_size()
steps = int(sys.argv[1])
server = r % 3 == 2
pp = world.Split(1 if server else 0, r)
big = np.zeros(4096)
coords, forces, flags = np.zeros(64), np.zeros(64), np.zeros(2)
work = np.random.default_rng(r).random(20000)

def particle_step(s):
    me = r // 3 * 3 + 2
    buf = big if (s == 0 and r in (1, 3)) else coords
    reqs = []
    if r % 3 == 1:
        reqs.append(world.Isend(flags, me, tag=9))
    reqs.append(world.Isend(buf, me, tag=7))
    MPI.Request.Waitall(reqs)
    n, w = pp.Get_size(), pp.Get_rank()
    if s < steps:
        halo = np.zeros(32)
        pp.Sendrecv(halo, (w + 1) % n, 0, np.zeros(32), (w - 1) % n, 0)
        pp.Sendrecv(halo, (w - 1) % n, 1, np.zeros(32), (w + 1) % n, 1)
        float(np.sum(work * work))
        world.Recv(forces, me, tag=0)

def server_step(s):
    a, b = r - 2, r - 1
    world.Recv(flags, b, tag=9)
    reqs = [world.Irecv(big, a, tag=7), world.Irecv(big.copy(), b, tag=7)]
    MPI.Request.Waitall(reqs)
    if s < steps:
        float(np.sum(work * work))
        MPI.Request.Waitall([world.Isend(forces, a, tag=0), world.Isend(forces, b, tag=0)])

world.Barrier()
for s in range(steps + 1):  # the last: shutdown flags and coordinates
    (server_step if server else particle_step)(s)
world.Barrier()
