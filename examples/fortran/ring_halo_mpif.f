! ring_halo_mpif.f -- ring_halo.f90 in fixed-form Fortran 77 style with
! include 'mpif.h': the same MPI calls, sizes and tags in the same order as
! examples/ring_halo.py, examples/c/ring_halo.c and ring_halo.f90.
!
! Build with the MPI's Fortran wrapper and run:
!   mpif90 -O2 -o ring_halo_mpif examples/fortran/ring_halo_mpif.f
!   mpiexec -n 4 ./ring_halo_mpif 1000 20         (n doubles, iterations)
      program ringmf
      implicit none
      include 'mpif.h'
      integer n, iters, rank, nprocs, left, right, i, k, ierr
      integer reqs(4)
      logical ok
      character*32 arg
      double precision, allocatable :: out(:), froml(:), fromr(:)
      double precision acc, t0

      call MPI_Init(ierr)
      n = 1000
      iters = 20
      if (command_argument_count() .ge. 1) then
        call get_command_argument(1, arg)
        read (arg, *) n
      end if
      if (command_argument_count() .ge. 2) then
        call get_command_argument(2, arg)
        read (arg, *) iters
      end if
      call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
      call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
      left = modulo(rank - 1, nprocs)
      right = modulo(rank + 1, nprocs)
      allocate (out(n), froml(n), fromr(n))
      ok = .true.
      t0 = MPI_Wtime()
      do 10 i = 0, iters - 1
        do 20 k = 1, n
          out(k) = rank * 1000 + i
   20   continue
        call MPI_Irecv(froml, n, MPI_DOUBLE_PRECISION, left, 0,
     &                 MPI_COMM_WORLD, reqs(1), ierr)
        call MPI_Irecv(fromr, n, MPI_DOUBLE_PRECISION, right, 1,
     &                 MPI_COMM_WORLD, reqs(2), ierr)
        call MPI_Isend(out, n, MPI_DOUBLE_PRECISION, right, 0,
     &                 MPI_COMM_WORLD, reqs(3), ierr)
        call MPI_Isend(out, n, MPI_DOUBLE_PRECISION, left, 1,
     &                 MPI_COMM_WORLD, reqs(4), ierr)
        call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE, ierr)
        ok = ok .and. froml(1) .eq. left * 1000 + i
     &          .and. fromr(n) .eq. right * 1000 + i
        acc = 0
        do 30 k = 1, n
          acc = acc + 1.0d0 / (1.0d0 + abs(froml(k) - fromr(k)))
   30   continue
        if (mod(i, 5) .eq. 4) then
          call MPI_Allreduce(MPI_IN_PLACE, acc, 1,
     &         MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
        end if
   10 continue
      call MPI_Barrier(MPI_COMM_WORLD, ierr)
      if (rank .eq. 0) then
        if (ok) then
          print '(a,i0,a,i0,a,i0,a,f0.6,a)', 'ring_halo P=', nprocs,
     &      ' n=', n, ' iters=', iters, ' time=', MPI_Wtime() - t0,
     &      ' check=OK'
        else
          print '(a)', 'ring_halo check=FAILED'
        end if
      end if
      if (.not. ok) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
      call MPI_Finalize(ierr)
      end
