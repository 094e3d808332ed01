/*
 * Both directions at once: one thread posts many small host-to-device copies (each written
 * whole into the link, kept by the client) while another's device-to-host chunks stream back
 * (each sent by a driver thread of the worker). Each side's writer then waits for the other
 * side to read; neither side's reading may wait for its own writer. Every byte is checked.
 */
#include <pthread.h>

#include "common.h"

#define ROUNDS 8
#define DN (512u << 10) /* device to host: chunks under 1 MiB are copied into the frames */
#define DCOPIES 64
#define HN (60u << 10) /* host to device: payloads up to 64 KiB are copied into the frames */
#define HCOPIES 1000

static CUcontext ctx;
static CUdeviceptr dsrc, ddst;

static void *to_host(void *arg)
{
	uint32_t *pin;
	CUstream s;
	(void)arg;
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAllocHost((void **)&pin, (size_t)DCOPIES * DN));
	memset(pin, 0, (size_t)DCOPIES * DN);
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < DCOPIES; i++)
			CHECK(cuMemcpyDtoHAsync((uint8_t *)pin + (size_t)i * DN, dsrc, DN, s));
		CHECK(cuStreamSynchronize(s));
	}
	for (int i = 0; i < DCOPIES; i++)
		for (size_t k = 0; k < DN / 4; k++)
			EXPECT(pin[(size_t)i * DN / 4 + k] == pattern32(k, 21), "copy %d, word %zu", i,
			       k);
	CHECK(cuMemFreeHost(pin));
	CHECK(cuStreamDestroy(s));
	return NULL;
}

int main(void)
{
	uint32_t *src, *back;
	CUstream s;
	pthread_t t;

	setup(&ctx);
	alarm(60); /* a deadlock fails here rather than at the test's timeout */
	src = malloc((size_t)HCOPIES * HN);
	back = malloc((size_t)HCOPIES * HN);
	EXPECT(src && back, "no host memory");
	for (size_t k = 0; k < DN / 4; k++)
		back[k] = pattern32(k, 21);
	CHECK(cuMemAlloc(&dsrc, DN));
	CHECK(cuMemAlloc(&ddst, (size_t)HCOPIES * HN));
	CHECK(cuMemcpyHtoD(dsrc, back, DN));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	EXPECT(pthread_create(&t, NULL, to_host, NULL) == 0, "no thread");
	for (size_t k = 0; k < (size_t)HCOPIES * HN / 4; k++)
		src[k] = pattern32(k, 100);
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < HCOPIES; i++)
			CHECK(cuMemcpyHtoDAsync(ddst + (size_t)i * HN, (uint8_t *)src + (size_t)i * HN,
						HN, s));
		CHECK(cuStreamSynchronize(s));
	}
	pthread_join(t, NULL);
	CHECK(cuMemcpyDtoH(back, ddst, (size_t)HCOPIES * HN));
	for (size_t k = 0; k < (size_t)HCOPIES * HN / 4; k++)
		EXPECT(back[k] == src[k], "host-to-device word %zu", k);
	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(dsrc));
	CHECK(cuMemFree(ddst));
	free(src);
	free(back);
	printf("duplex: %d rounds of %d x %u KiB each way at once OK\n", ROUNDS, HCOPIES, HN >> 10);
	return 0;
}
