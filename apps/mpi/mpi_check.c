/*
 * mpi_check: an MPI program over whatever transport mpirun chose (TestOpenMPI runs it
 * with --mca pml ucx over rocelab's RNICs, one rank per lab host). Rank 0 and the last
 * rank ping-pong messages of 8 B to 1 MiB, checking every byte; all ranks allreduce
 * (sum) a vector of their ranks and alltoall blocks tagged with sender and receiver,
 * checking the results. It prints each rank's host name (one per host, as MPI sees
 * nodes), the ping-pong's half round trip for 8 B, and "ok" on rank 0 when every check
 * held; a failed check prints "FAIL" and aborts the job.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, int rank, const char *what)
{
	if (!ok) {
		printf("FAIL: rank %d: %s\n", rank, what);
		fflush(stdout);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size, len;
	char host[MPI_MAX_PROCESSOR_NAME];
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &len);
	printf("rank %d of %d on %s\n", rank, size, host);
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);

	/* ping-pong between rank 0 and the last rank, every byte checked */
	int peer = size - 1;
	uint8_t *buf = malloc(1 << 20);
	for (int n = 8; n <= (1 << 20) && size > 1; n *= 8) {
		int iters = n <= 4096 ? 100 : 10;
		double t0 = MPI_Wtime();
		for (int i = 0; i < iters; i++) {
			if (rank == 0) {
				for (int k = 0; k < n; k++)
					buf[k] = (uint8_t)(k * 7 + i + n);
				MPI_Send(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(buf, n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int k = 0; k < n; k++)
					check(buf[k] == (uint8_t)(k * 7 + i + n + 1), rank, "ping-pong data");
			} else if (rank == peer) {
				MPI_Recv(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int k = 0; k < n; k++)
					buf[k]++;
				MPI_Send(buf, n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
			}
		}
		if (rank == 0 && n == 8)
			printf("ping-pong 8 B: %.1f us half round trip\n", (MPI_Wtime() - t0) / iters / 2 * 1e6);
	}
	free(buf);

	/* allreduce: the sum of every rank's vector of its rank */
	enum { N = 1024 };
	long in[N], out[N];
	for (int i = 0; i < N; i++)
		in[i] = rank + i;
	MPI_Allreduce(in, out, N, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < N; i++)
		check(out[i] == (long)size * (size - 1) / 2 + (long)size * i, rank, "allreduce sum");

	/* alltoall: block j of rank r holds r*1000+j; rank r receives j*1000+r from j */
	int *sb = malloc(sizeof(int) * 256 * size), *rb = malloc(sizeof(int) * 256 * size);
	for (int j = 0; j < size; j++)
		for (int k = 0; k < 256; k++)
			sb[j * 256 + k] = rank * 1000 + j;
	MPI_Alltoall(sb, 256, MPI_INT, rb, 256, MPI_INT, MPI_COMM_WORLD);
	for (int j = 0; j < size; j++)
		for (int k = 0; k < 256; k++)
			check(rb[j * 256 + k] == j * 1000 + rank, rank, "alltoall block");
	free(sb);
	free(rb);

	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("ok\n");
	MPI_Finalize();
	return 0;
}
