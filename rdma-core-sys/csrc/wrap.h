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

/* The slow-path receive queue (the `verbs` port): the calls the headers
 * define inline through the context's or the CQ's operations. */
struct ibv_cq_ex *eswitch_ibv_create_cq_ex(struct ibv_context *context,
                                           struct ibv_cq_init_attr_ex *attr);
struct ibv_cq *eswitch_ibv_cq_ex_to_cq(struct ibv_cq_ex *cq);
int eswitch_ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                          struct ibv_recv_wr **bad_wr);
int eswitch_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
                          struct ibv_send_wr **bad_wr);
int eswitch_ibv_destroy_flow_action(struct ibv_flow_action *action);
/* ibv_start_poll / ibv_next_poll: 0 with a completion, ENOENT when the CQ
 * is empty, another errno on failure. ibv_end_poll only after a
 * start_poll that returned 0. */
int eswitch_ibv_start_poll(struct ibv_cq_ex *cq);
int eswitch_ibv_next_poll(struct ibv_cq_ex *cq);
void eswitch_ibv_end_poll(struct ibv_cq_ex *cq);

/* One completion as the extended CQ reads it back. */
struct eswitch_wc {
	uint64_t wr_id;
	uint32_t status;   /* enum ibv_wc_status: 0 = success */
	uint32_t opcode;   /* enum ibv_wc_opcode: 128 = a receive */
	uint32_t byte_len;
	uint32_t flow_tag; /* with IBV_WC_EX_WITH_FLOW_TAG; else 0 */
	uint32_t reg_b;    /* with IBV_WC_EX_WITH_IMM: mlx5 returns the CQE's
	                    * dword 36 (flow_table_metadata), host order */
	uint32_t pad;
};
/* The current completion's fields; `wc_flags` as the CQ was created with
 * (a reader the CQ was not created for is a NULL pointer in rdma-core). */
void eswitch_ibv_wc_read(struct ibv_cq_ex *cq, uint64_t wc_flags,
                         struct eswitch_wc *out);
