/* SPDX-License-Identifier: MIT */
/*
 * libniu-mpi-finalize.so: preloaded into every MPI rank by guest/mpi/mpiexec
 * (LD_PRELOAD, passed on by Hydra), it works around a hang in MPI_Finalize
 * of Debian's MPICH 4.0.2 over UCX's TCP transport (docs/guest.md, "MPI
 * programs", Known problem).
 *
 * MPICH 4.0.2 (ch4:ucx) closes every endpoint in MPI_Finalize with
 * ucp_disconnect_nb(), which flushes it, and then waits in a PMI call.  A
 * rank whose closes complete at once goes on into that PMI call and stops
 * progressing UCX; a peer whose close still waits for an answer from it
 * then spins for ever.  Seen in the guests (/proc of both ranks, 3 of 6
 * runs of "mpiexec -n 2 cpi" on 2 nodes): rank 0 running (R), in UCX
 * progress; rank 1 asleep in a read of its PMI socket
 * (unix_stream_read_generic) with 25 bytes of rank 0's unread in its UCX
 * TCP socket.  Later MPICH does a PMI barrier before the closes
 * (MPIR_CVAR_NO_COLLECTIVE_FINALIZE), which 4.0.2 does not have.
 *
 * MPI requires every communication to be complete before MPI_Finalize, so
 * nothing a rank owes its peers is in flight there but the barrier this
 * library adds first (MPI_Finalize wrapped through the profiling
 * interface): ucp_disconnect_nb() here closes nothing and reports the
 * close done, so no rank waits for a peer that went on, and
 * ucp_worker_destroy(), later in the same finalize, destroys the endpoints
 * without asking anyone.  (A forced close, UCP_EP_CLOSE_MODE_FORCE, is
 * refused with "Invalid parameter": MPICH creates its endpoints without
 * peer error handling.)  With it, 0 of 8 runs hung, against 3 of 6
 * without; its cost is that a peer may see the connection reset after
 * its own finalize.
 */
#include <mpi.h>
#include <stddef.h>

/* From UCX's ucp.h (libucx-dev is not installed for one prototype). */
typedef struct ucp_ep *ucp_ep_h;
typedef void *ucs_status_ptr_t;
ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep);

/*
 * MPICH calls this only from its finalize, for every endpoint: done at
 * once (UCS_OK); ucp_worker_destroy() then closes what is left without
 * asking any peer.
 */
ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep)
{
	(void)ep;
	return NULL;
}

int MPI_Finalize(void)
{
	PMPI_Barrier(MPI_COMM_WORLD);
	return PMPI_Finalize();
}
