/*
 * The handle table: which pointers are live simgpu objects, and of what kind.
 *
 * A real driver refuses a destroyed or foreign handle with CUDA_ERROR_INVALID_HANDLE (or
 * INVALID_CONTEXT) instead of crashing; simgpu does the same by looking every handle up here
 * before touching the object behind it. The table never dereferences the pointers it holds.
 * It is a glibc binary tree (tsearch) under its own lock, so a lookup never needs sim_lock.
 */
#include <search.h>
#include <stdlib.h>

#include "sim.h"

struct handle {
	const void *p;
	int kind;
};

static void *root;
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

static int cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct handle *)a)->p;
	uintptr_t y = (uintptr_t)((const struct handle *)b)->p;
	return x < y ? -1 : x > y;
}

/*
 * sim_handle_add() - make h a live handle of the given kind.
 * Returns 0, or -1 when out of memory.
 */
int sim_handle_add(const void *h, int kind)
{
	struct handle *n = malloc(sizeof(*n)), **slot;

	if (!n)
		return -1;
	n->p = h;
	n->kind = kind;
	pthread_mutex_lock(&handle_lock);
	slot = tsearch(n, &root, cmp);
	if (slot && *slot != n) /* re-adding (a primary context coming back) updates the kind */
		(*slot)->kind = kind;
	pthread_mutex_unlock(&handle_lock);
	if (!slot || *slot != n)
		free(n);
	return slot ? 0 : -1;
}

/* sim_handle_del() - h stops being a live handle; unknown pointers are ignored. */
void sim_handle_del(const void *h)
{
	struct handle key = {h, 0}, **slot, *n = NULL;

	pthread_mutex_lock(&handle_lock);
	slot = tfind(&key, &root, cmp);
	if (slot) {
		n = *slot;
		tdelete(&key, &root, cmp);
	}
	pthread_mutex_unlock(&handle_lock);
	free(n);
}

/* sim_handle_kind() - the enum sim_kind of a live handle, or 0. */
int sim_handle_kind(const void *h)
{
	struct handle key = {h, 0}, **slot;
	int kind = 0;

	if (!h)
		return 0;
	pthread_mutex_lock(&handle_lock);
	slot = tfind(&key, &root, cmp);
	if (slot)
		kind = (*slot)->kind;
	pthread_mutex_unlock(&handle_lock);
	return kind;
}
