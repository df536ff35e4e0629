/* What rdma-core-sys binds: the installed verbs and mlx5dv headers, and
 * the wrappers (csrc/wrap.c) of the calls those headers define inline. */
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

/* mlx5dv_query_port: static inline over _mlx5dv_query_port. */
int eswitch_mlx5dv_query_port(struct ibv_context *context, uint32_t port_num,
                              struct mlx5dv_port *info);
/* ibv_query_port: a macro; the exported symbol takes an older, smaller
 * struct. */
int eswitch_ibv_query_port(struct ibv_context *context, uint8_t port_num,
                           struct ibv_port_attr *port_attr);
/* ibv_query_device_ex: static inline through the context's ops. */
int eswitch_ibv_query_device_ex(struct ibv_context *context,
                                const struct ibv_query_device_ex_input *input,
                                struct ibv_device_attr_ex *attr);
/* ibv_create_flow / ibv_destroy_flow: static inline through the ops. */
struct ibv_flow *eswitch_ibv_create_flow(struct ibv_qp *qp,
                                         struct ibv_flow_attr *flow);
int eswitch_ibv_destroy_flow(struct ibv_flow *flow_id);
/* mlx5dv_dump_dr_domain into a malloc'd buffer (open_memstream): *buf
 * and *len on success (free *buf with free()); the errno on failure. */
int eswitch_dump_dr_domain(struct mlx5dv_dr_domain *domain, char **buf,
                           size_t *len);
