/* Out-of-line wrappers of the calls rdma-core's headers define inline, so
 * Rust can link them (../shared/MLX5.md, "Calls that are not symbols"). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <endian.h>
#include <stdlib.h>

#include "wrap.h"

int eswitch_mlx5dv_query_port(struct ibv_context *context, uint32_t port_num,
                              struct mlx5dv_port *info)
{
	return mlx5dv_query_port(context, port_num, info);
}

int eswitch_ibv_query_port(struct ibv_context *context, uint8_t port_num,
                           struct ibv_port_attr *port_attr)
{
	return ibv_query_port(context, port_num, port_attr);
}

int eswitch_ibv_query_device_ex(struct ibv_context *context,
                                const struct ibv_query_device_ex_input *input,
                                struct ibv_device_attr_ex *attr)
{
	return ibv_query_device_ex(context, input, attr);
}

struct ibv_flow *eswitch_ibv_create_flow(struct ibv_qp *qp,
                                         struct ibv_flow_attr *flow)
{
	return ibv_create_flow(qp, flow);
}

int eswitch_ibv_destroy_flow(struct ibv_flow *flow_id)
{
	return ibv_destroy_flow(flow_id);
}

int eswitch_dump_dr_domain(struct mlx5dv_dr_domain *domain, char **buf,
                           size_t *len)
{
	FILE *f;
	int ret;

	*buf = NULL;
	*len = 0;
	f = open_memstream(buf, len);
	if (!f)
		return errno;
	ret = mlx5dv_dump_dr_domain(f, domain);
	if (fclose(f) != 0 && ret == 0)
		ret = errno;
	if (ret != 0) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
	return ret;
}

struct ibv_cq_ex *eswitch_ibv_create_cq_ex(struct ibv_context *context,
                                           struct ibv_cq_init_attr_ex *attr)
{
	return ibv_create_cq_ex(context, attr);
}

struct ibv_cq *eswitch_ibv_cq_ex_to_cq(struct ibv_cq_ex *cq)
{
	return ibv_cq_ex_to_cq(cq);
}

int eswitch_ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                          struct ibv_recv_wr **bad_wr)
{
	return ibv_post_recv(qp, wr, bad_wr);
}

int eswitch_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
                          struct ibv_send_wr **bad_wr)
{
	return ibv_post_send(qp, wr, bad_wr);
}

int eswitch_ibv_destroy_flow_action(struct ibv_flow_action *action)
{
	return ibv_destroy_flow_action(action);
}

int eswitch_ibv_start_poll(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };

	return ibv_start_poll(cq, &attr);
}

int eswitch_ibv_next_poll(struct ibv_cq_ex *cq)
{
	return ibv_next_poll(cq);
}

void eswitch_ibv_end_poll(struct ibv_cq_ex *cq)
{
	ibv_end_poll(cq);
}

void eswitch_ibv_wc_read(struct ibv_cq_ex *cq, uint64_t wc_flags,
                         struct eswitch_wc *out)
{
	out->wr_id = cq->wr_id;
	out->status = cq->status;
	out->opcode = ibv_wc_read_opcode(cq);
	out->byte_len = (wc_flags & IBV_WC_EX_WITH_BYTE_LEN) ?
				ibv_wc_read_byte_len(cq) : 0;
	out->flow_tag = (wc_flags & IBV_WC_EX_WITH_FLOW_TAG) ?
				ibv_wc_read_flow_tag(cq) : 0;
	out->reg_b = (wc_flags & IBV_WC_EX_WITH_IMM) ?
			     be32toh(ibv_wc_read_imm_data(cq)) : 0;
	out->pad = 0;
}
