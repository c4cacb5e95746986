/* Two rank classes on Comm_split communicators, in the shape of a particle/PME split:
 * every 4th rank (r mod 4 = 3) is a "mesh" rank, the others "particle" ranks; each class
 * has its own communicator (MPI_Comm_split by class, key = rank).
 *
 * Each step: every particle rank sends its share of N coordinates to its mesh rank
 * (r | 3) on MPI_COMM_WORLD; the particle ranks exchange a non-periodic 1-D halo on their
 * communicator whose message count and sizes depend on the rank's place (1 or 2
 * messages to the right neighbour, as atoms would fall); the mesh ranks transpose with
 * an all-to-all on theirs and send forces back to their particle ranks; then one
 * Allreduce on MPI_COMM_WORLD.  Usage: classsplit [N] [steps]. */
#include <mpi.h>
#include <stdlib.h>

static int pulses(int cr) { return 1 + (cr % 3 == 0); }

int main(int argc, char **argv)
{
    int P, r, cr, cn, s, j, k;
    long N, nat, blk;
    int steps;
    char *a, *b;
    double e = 1.0, etot;
    MPI_Comm cls;
    MPI_Request rq[16];

    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    N = argc > 1 ? atol(argv[1]) : 96000;
    steps = argc > 2 ? atoi(argv[2]) : 20;
    int mesh = (r % 4 == 3) && P >= 4;
    MPI_Comm_split(MPI_COMM_WORLD, mesh, r, &cls);
    MPI_Comm_rank(cls, &cr);
    MPI_Comm_size(cls, &cn);
    int nmesh = P / 4, npart = P - nmesh;
    nat = N / npart;
    blk = 8 * N / ((long)nmesh * nmesh);
    a = calloc(16 * N + 4096, 1);
    b = calloc(16 * N + 4096, 1);
    for (s = 0; s < steps; s++) {
        if (!mesh) {
            int home = r | 3;
            MPI_Isend(a, (int)(12 * nat), MPI_BYTE, home, 7, MPI_COMM_WORLD, &rq[0]);
            MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
            int nl = cr > 0 ? pulses(cr - 1) : 0, nr = cr + 1 < cn ? pulses(cr) : 0;
            k = 0;
            for (j = 0; j < nl; j++)
                MPI_Irecv(b + 4096 * j, 8 * (100 + 10 * j + cr - 1), MPI_BYTE, cr - 1, 1, cls, &rq[k++]);
            for (j = 0; j < nr; j++)
                MPI_Isend(a, 8 * (100 + 10 * j + cr), MPI_BYTE, cr + 1, 1, cls, &rq[k++]);
            MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
            MPI_Recv(b, (int)(12 * nat), MPI_BYTE, home, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (j = 0; j < 3; j++)
                MPI_Irecv(b + j * 12 * nat, (int)(12 * nat), MPI_BYTE, r - 3 + j, 7, MPI_COMM_WORLD, &rq[j]);
            MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
            MPI_Alltoall(a, (int)blk, MPI_BYTE, b, (int)blk, MPI_BYTE, cls);
            for (j = 0; j < 3; j++)
                MPI_Isend(a, (int)(12 * nat), MPI_BYTE, r - 3 + j, 0, MPI_COMM_WORLD, &rq[j]);
            MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
        }
        MPI_Allreduce(&e, &etot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Comm_free(&cls);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
