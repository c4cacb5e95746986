! ring_halo_f08.f90 -- ring_halo.f90 with the mpi_f08 module: the same MPI
! calls, sizes and tags in the same order as examples/ring_halo.py,
! examples/c/ring_halo.c and ring_halo.f90 (handles are derived types,
! ierror is left out).
!
! Build with the MPI's Fortran wrapper and run:
!   mpif90 -O2 -o ring_halo_f08 examples/fortran/ring_halo_f08.f90
!   mpiexec -n 4 ./ring_halo_f08 1000 20          (n doubles, iterations)
program ring_halo_f08
  use mpi_f08
  implicit none
  integer :: n, iters, rank, nprocs, left, right, i
  type(MPI_Request) :: reqs(4)
  logical :: ok
  character(len=32) :: arg
  double precision, allocatable :: out(:), from_left(:), from_right(:)
  double precision :: acc, t0

  call MPI_Init()
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
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  left = modulo(rank - 1, nprocs)
  right = modulo(rank + 1, nprocs)
  allocate (out(n), from_left(n), from_right(n))
  ok = .true.
  t0 = MPI_Wtime()
  do i = 0, iters - 1
    out = rank * 1000 + i
    call MPI_Irecv(from_left, n, MPI_DOUBLE_PRECISION, left, 0, MPI_COMM_WORLD, reqs(1))
    call MPI_Irecv(from_right, n, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, reqs(2))
    call MPI_Isend(out, n, MPI_DOUBLE_PRECISION, right, 0, MPI_COMM_WORLD, reqs(3))
    call MPI_Isend(out, n, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, reqs(4))
    call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE)
    ok = ok .and. from_left(1) == left * 1000 + i .and. from_right(n) == right * 1000 + i
    acc = sum(1.0d0 / (1.0d0 + abs(from_left - from_right)))
    if (mod(i, 5) == 4) then
      call MPI_Allreduce(MPI_IN_PLACE, acc, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
    end if
  end do
  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) then
    if (ok) then
      print '(a,i0,a,i0,a,i0,a,f0.6,a)', 'ring_halo P=', nprocs, ' n=', n, ' iters=', iters, &
        ' time=', MPI_Wtime() - t0, ' check=OK'
    else
      print '(a)', 'ring_halo check=FAILED'
    end if
  end if
  if (.not. ok) call MPI_Abort(MPI_COMM_WORLD, 1)
  call MPI_Finalize()
end program ring_halo_f08
