/* Out-of-line wrappers of the calls rdma-core's headers define inline, so
 * Rust can link them (../shared/MLX5.md, "Calls that are not symbols"). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
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
