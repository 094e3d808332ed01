/*
 * Packing kernel parameters: each argument copied to its offset in one buffer, the layout
 * CU_LAUNCH_PARAM_BUFFER_POINTER expects. Kept apart from launch.c so it is unit-tested alone.
 */
#include <string.h>

#include "ip.h"
#include "rgpu/err.h"

int ip_pack_params(const struct ip_funcinfo *info, void **params, uint8_t *buf)
{
	memset(buf, 0, info->argbytes);
	for (uint32_t i = 0; i < info->nparams; i++) {
		if (!params[i])
			return RGPU_EINVAL;
		memcpy(buf + info->offset[i], params[i], info->size[i]);
	}
	return 0;
}
