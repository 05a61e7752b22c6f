/* What cma.c offers the library's other files, and nothing outside it (librdmacm.map
 * keeps every name but rdma-core's local). */
#ifndef ROCELAB_LIBRDMACM_INTERNAL_H
#define ROCELAB_LIBRDMACM_INTERNAL_H

#include <rdma/rdma_cma.h>

/* rl_route_ah fills a with the address handle of id's resolved route as the kernel
 * builds it from the path: global, the route's GIDs (the source by its index in the
 * port's GID table), flow_label, hop limit 64. */
void rl_route_ah(struct rdma_cm_id *id, uint32_t flow_label, struct ibv_ah_attr *a);

#endif
