! ring_halo.f90 -- the Fortran twin of examples/ring_halo.py and
! examples/c/ring_halo.c: the same MPI calls, sizes and tags in the same order.
!
! Build with the MPI's Fortran wrapper and run:
!   mpif90 -O2 -o ring_halo_f examples/fortran/ring_halo.f90
!   mpiexec -n 4 ./ring_halo_f 1000 20            (n doubles, iterations)
program ring_halo
  use mpi
  implicit none
  integer :: n, iters, rank, nprocs, left, right, i, ierr
  integer :: reqs(4)
  logical :: ok
  character(len=32) :: arg
  double precision, allocatable :: out(:), from_left(:), from_right(:)
  double precision :: acc, t0

  call MPI_Init(ierr)
  n = 1000
  iters = 20
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  left = modulo(rank - 1, nprocs)
  right = modulo(rank + 1, nprocs)
  allocate (out(n), from_left(n), from_right(n))
  ok = .true.
  t0 = MPI_Wtime()
  do i = 0, iters - 1
    out = rank * 1000 + i
    call MPI_Irecv(from_left, n, MPI_DOUBLE_PRECISION, left, 0, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Irecv(from_right, n, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_Isend(out, n, MPI_DOUBLE_PRECISION, right, 0, MPI_COMM_WORLD, reqs(3), ierr)
    call MPI_Isend(out, n, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, reqs(4), ierr)
    call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE, ierr)
    ok = ok .and. from_left(1) == left * 1000 + i .and. from_right(n) == right * 1000 + i
    acc = sum(sqrt(abs(from_left - from_right) + 1.0d0))
    if (mod(i, 5) == 4) then
      call MPI_Allreduce(MPI_IN_PLACE, acc, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (ok) then
      print '(a,i0,a,i0,a,i0,a,f0.6,a)', 'ring_halo P=', nprocs, ' n=', n, ' iters=', iters, &
        ' time=', MPI_Wtime() - t0, ' check=OK'
    else
      print '(a)', 'ring_halo check=FAILED'
    end if
  end if
  if (.not. ok) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  call MPI_Finalize(ierr)
end program ring_halo
