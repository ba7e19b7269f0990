// fakecudart.c: a stand-in for libcudart that the cuda package's tests
// build with gcc and load in place of the real library. It has the same
// symbol names and signatures as the CUDA runtime functions the sink uses,
// with host memory behind "device" pointers, and it is strict where a real
// GPU would be forgiving to a buggy caller:
//
//   - cudaMemcpyAsync does NOT copy: it queues the copy on its stream, and
//     the copy happens only when the caller synchronizes (an event recorded
//     after it, the stream, the device, or a synchronous cudaMemcpy or
//     cudaFree). A sink that refills a staging buffer before the copy from
//     it has completed therefore uploads the wrong bytes.
//   - Each queued copy remembers a checksum of its source bytes; if they
//     changed before the copy ran, the fake logs "RACE" and every later
//     call fails with fakeErrRace.
//   - Every copy must lie inside one live allocation (device side, and
//     pinned host side for async copies), else cudaErrorInvalidValue.
//
// $FAKE_CUDART_RENAME="FROM:TO" renames a file at the first call (see
// init_env).
//
// Every call is logged, one line each, to the file named by
// $FAKE_CUDART_LOG (read at the first call) so the test can count pinned
// buffers, copies, and buffer reuse.
//
// Build: gcc -shared -fPIC -O2 -pthread -o libcudart.so fakecudart.c

#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;

enum {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInvalidDevice = 101,
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorHostMemoryAlreadyRegistered = 712,
	cudaErrorHostMemoryNotRegistered = 713,
	fakeErrRace = 999,
};

enum { kindH2D = 1, kindD2H = 2 };

typedef struct alloc {
	char* p;
	size_t n;
	int fd;   // device memory: the memfd behind it (CUDA IPC hands it out), or -1
	int ipc;  // opened with cudaIpcOpenMemHandle: closed with cudaIpcCloseMemHandle, not freed
	int host; // 0 device memory, 1 pinned host memory (cudaHostAlloc), 2 registered host memory (cudaHostRegister: not ours to free)
	struct alloc* next;
} alloc;

struct fevent;

typedef struct {
	int is_event;
	char* dst;
	const char* src;
	size_t n;
	uint64_t sum;
	struct fevent* ev;
	unsigned gen;
} op;

typedef struct fstream {
	op* q;
	size_t len, cap;
	int id;
} fstream;

typedef struct fevent {
	fstream* s;  // stream of the last record, NULL when never recorded
	unsigned gen; // records so far
	int pending;  // the last record has not run yet
	int id;
} fevent;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static FILE* logfile;
static int log_opened;
static int sticky;
static alloc* allocs;
static fstream* streams[1024];
static int nstreams;
static int next_id = 1;
static int devices = 1;
static size_t device_mem = (size_t)64 << 30; // $FAKE_CUDART_MEM: bytes of "device memory"
static size_t device_used;

static void init_env(void) {
	if (!log_opened) {
		log_opened = 1;
		const char* p = getenv("FAKE_CUDART_LOG");
		if (p && *p) logfile = fopen(p, "a");
		const char* d = getenv("FAKE_CUDART_DEVICES");
		if (d && *d) devices = atoi(d);
		const char* m = getenv("FAKE_CUDART_MEM");
		if (m && *m) device_mem = (size_t)strtoull(m, NULL, 10);
		// $FAKE_CUDART_RENAME="FROM:TO" renames FROM to TO at the first
		// call: a `mv` over a checkpoint that lands after the command
		// validated it and before it uploads (tests of mount --gpu).
		const char* r = getenv("FAKE_CUDART_RENAME");
		const char* colon = r ? strchr(r, ':') : NULL;
		if (colon) {
			char from[4096];
			size_t n = (size_t)(colon - r);
			if (n < sizeof from) {
				memcpy(from, r, n);
				from[n] = 0;
				rename(from, colon + 1);
			}
		}
	}
}

static void logline(const char* fmt, ...) {
	init_env();
	if (!logfile) return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(logfile, fmt, ap);
	va_end(ap);
	fputc('\n', logfile);
	fflush(logfile);
}

static uint64_t checksum(const char* p, size_t n) {
	uint64_t h = 1469598103934665603ull;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211ull;
	}
	for (; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h;
}

// find returns the live allocation holding [p, p+n), or NULL.
static alloc* find(const void* p, size_t n, int host) {
	const char* c = (const char*)p;
	for (alloc* a = allocs; a; a = a->next) {
		if (a->host == host && c >= a->p && c + n <= a->p + a->n && c + n >= c) return a;
	}
	return NULL;
}

static void exec_op(op* o) {
	if (o->is_event) {
		if (o->gen == o->ev->gen) o->ev->pending = 0;
		return;
	}
	if (checksum(o->src, o->n) != o->sum) {
		logline("RACE src=%p n=%zu dst=%p: staging bytes changed before the queued copy ran", (void*)o->src, o->n, (void*)o->dst);
		sticky = fakeErrRace;
	}
	memcpy(o->dst, o->src, o->n);
	logline("exec dst=%p src=%p n=%zu", (void*)o->dst, (void*)o->src, o->n);
}

// run executes s's queued operations up to and including the record of
// ev at generation gen (all of them when ev is NULL).
static void run(fstream* s, fevent* ev, unsigned gen) {
	size_t i = 0;
	for (; i < s->len; i++) {
		op* o = &s->q[i];
		exec_op(o);
		if (ev && o->is_event && o->ev == ev && o->gen == gen) {
			i++;
			break;
		}
	}
	memmove(s->q, s->q + i, (s->len - i) * sizeof(op));
	s->len -= i;
}

static void run_all(void) {
	for (int i = 0; i < nstreams; i++)
		if (streams[i]) run(streams[i], NULL, 0);
}

static int push(fstream* s, op o) {
	if (s->len == s->cap) {
		size_t c = s->cap ? 2 * s->cap : 16;
		op* q = realloc(s->q, c * sizeof(op));
		if (!q) return cudaErrorMemoryAllocation;
		s->q = q;
		s->cap = c;
	}
	s->q[s->len++] = o;
	return cudaSuccess;
}

static int live_stream(fstream* s) {
	for (int i = 0; i < nstreams; i++)
		if (streams[i] == s) return 1;
	return 0;
}

#define ENTER() pthread_mutex_lock(&mu)
#define LEAVE(e) do { cudaError_t e_ = (e); pthread_mutex_unlock(&mu); return e_; } while (0)
#define CHECK_STICKY() do { if (sticky) LEAVE(sticky); } while (0)

const char* cudaGetErrorString(cudaError_t e) {
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
	case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
	case fakeErrRace: return "fake: a staging buffer changed before its queued copy ran";
	}
	return "unrecognized error code";
}

cudaError_t cudaGetDeviceCount(int* n) {
	ENTER();
	logline("cudaGetDeviceCount");
	*n = devices;
	LEAVE(cudaSuccess);
}

cudaError_t cudaSetDevice(int d) {
	ENTER();
	logline("cudaSetDevice device=%d", d);
	if (d < 0 || d >= devices) LEAVE(cudaErrorInvalidDevice);
	LEAVE(cudaSuccess);
}

cudaError_t cudaRuntimeGetVersion(int* v) { *v = 12040; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int* v) { *v = 12040; return cudaSuccess; }

static cudaError_t do_alloc(void** p, size_t n, int host, const char* name) {
	ENTER();
	CHECK_STICKY();
	init_env();
	if (!host && n > device_mem - device_used) {
		logline("%s n=%zu -> out of device memory (%zu of %zu used)", name, n, device_used, device_mem);
		LEAVE(cudaErrorMemoryAllocation);
	}
	alloc* a = calloc(1, sizeof *a);
	// Pinned memory is page-aligned, as cudaHostAlloc's is (O_DIRECT
	// reads go straight into it). Device memory lives in a memfd, so that
	// another process can map it through a CUDA IPC handle.
	char* m = NULL;
	int fd = -1;
	if (host) {
		if (posix_memalign((void**)&m, 4096, n ? n : 1) != 0) m = NULL;
	} else {
		fd = memfd_create("fakecudart-device", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, n ? n : 1) == 0) {
			m = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (m == MAP_FAILED) m = NULL;
		}
		if (!m && fd >= 0) { close(fd); fd = -1; }
	}
	if (a) a->fd = fd;
	if (!a || !m) {
		free(a);
		free(m);
		logline("%s n=%zu -> out of memory", name, n);
		LEAVE(cudaErrorMemoryAllocation);
	}
	memset(m, 0xA5, n); // device memory starts as garbage, not zeros
	a->p = m;
	a->n = n;
	a->host = host;
	if (!host) device_used += n;
	a->next = allocs;
	allocs = a;
	*p = m;
	logline("%s ptr=%p n=%zu", name, (void*)m, n);
	LEAVE(cudaSuccess);
}

cudaError_t cudaMalloc(void** p, size_t n) { return do_alloc(p, n, 0, "cudaMalloc"); }

cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int flags) {
	(void)flags;
	return do_alloc(p, n, 1, "cudaHostAlloc");
}

static cudaError_t do_free(void* p, int host, const char* name) {
	ENTER();
	run_all(); // freeing synchronizes, as on a GPU
	logline("%s ptr=%p", name, p);
	if (!p) LEAVE(cudaSuccess);
	for (alloc** ap = &allocs; *ap; ap = &(*ap)->next) {
		alloc* a = *ap;
		if (a->p == p && a->host == host) {
			if (a->ipc) {
				logline("ERROR %s of memory opened with cudaIpcOpenMemHandle %p", name, p);
				LEAVE(cudaErrorInvalidValue);
			}
			*ap = a->next;
			if (!host) {
				device_used -= a->n;
				munmap(a->p, a->n ? a->n : 1);
				close(a->fd);
			} else {
				free(a->p);
			}
			free(a);
			LEAVE(sticky);
		}
	}
	logline("ERROR %s of unknown pointer %p", name, p);
	LEAVE(cudaErrorInvalidValue);
}

cudaError_t cudaFree(void* p) { return do_free(p, 0, "cudaFree"); }
cudaError_t cudaFreeHost(void* p) { return do_free(p, 1, "cudaFreeHost"); }

// cudaHostRegister records [p, p+n) as registered host memory, which
// asynchronous copies may then read; a range overlapping another
// registration or pinned allocation is refused, as CUDA does.
cudaError_t cudaHostRegister(void* p, size_t n, unsigned int flags) {
	ENTER();
	CHECK_STICKY();
	logline("cudaHostRegister ptr=%p n=%zu flags=%u", p, n, flags);
	if (!p || !n) LEAVE(cudaErrorInvalidValue);
	const char* c = (const char*)p;
	for (alloc* a = allocs; a; a = a->next) {
		if (a->host && c < a->p + a->n && a->p < c + n) {
			logline("ERROR cudaHostRegister of a range already registered or pinned");
			LEAVE(cudaErrorHostMemoryAlreadyRegistered);
		}
	}
	alloc* a = calloc(1, sizeof *a);
	if (!a) LEAVE(cudaErrorMemoryAllocation);
	a->p = (char*)p;
	a->n = n;
	a->host = 2;
	a->next = allocs;
	allocs = a;
	LEAVE(cudaSuccess);
}

// cudaHostUnregister ends a registration: it synchronizes first (no copy
// may still read the range), then forgets it.
cudaError_t cudaHostUnregister(void* p) {
	ENTER();
	run_all();
	logline("cudaHostUnregister ptr=%p", p);
	for (alloc** ap = &allocs; *ap; ap = &(*ap)->next) {
		alloc* a = *ap;
		if (a->p == p && a->host == 2) {
			*ap = a->next;
			free(a);
			LEAVE(sticky);
		}
	}
	logline("ERROR cudaHostUnregister of a pointer not registered %p", p);
	LEAVE(cudaErrorHostMemoryNotRegistered);
}

// CUDA IPC: a handle names the exporting process and the memfd behind an
// allocation; another process maps that file, so both see the same
// "device memory", as on a GPU. Opening a handle in its own process, of
// a process that is gone, or of anything but an allocation's base fails.
typedef struct { char reserved[64]; } cudaIpcMemHandle_t;
typedef struct { char magic[8]; int32_t pid, fd; uint64_t n; } fakeHandle;

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* h, void* p) {
	ENTER();
	CHECK_STICKY();
	logline("cudaIpcGetMemHandle ptr=%p", p);
	for (alloc* a = allocs; a; a = a->next) {
		if (a->host == 0 && !a->ipc && a->p == p) {
			fakeHandle f = {"FAKEIPC", (int32_t)getpid(), a->fd, a->n};
			memset(h, 0, sizeof *h);
			memcpy(h->reserved, &f, sizeof f);
			LEAVE(cudaSuccess);
		}
	}
	logline("ERROR cudaIpcGetMemHandle of %p, which is no allocation's base", p);
	LEAVE(cudaErrorInvalidValue);
}

cudaError_t cudaIpcOpenMemHandle(void** p, cudaIpcMemHandle_t h, unsigned int flags) {
	ENTER();
	CHECK_STICKY();
	fakeHandle f;
	memcpy(&f, h.reserved, sizeof f);
	logline("cudaIpcOpenMemHandle pid=%d fd=%d n=%llu flags=%u", f.pid, f.fd, (unsigned long long)f.n, flags);
	if (memcmp(f.magic, "FAKEIPC", 8) != 0 || f.pid == getpid()) {
		logline("ERROR cudaIpcOpenMemHandle of a bad handle or in the exporting process");
		LEAVE(cudaErrorInvalidValue);
	}
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd/%d", f.pid, f.fd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		logline("ERROR cudaIpcOpenMemHandle: %s: the exporting process or its allocation is gone", path);
		LEAVE(cudaErrorInvalidValue);
	}
	char* m = mmap(NULL, f.n ? f.n : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	alloc* a = calloc(1, sizeof *a);
	if (m == MAP_FAILED || !a) {
		free(a);
		LEAVE(cudaErrorMemoryAllocation);
	}
	a->p = m;
	a->n = f.n;
	a->fd = -1;
	a->ipc = 1;
	a->next = allocs;
	allocs = a;
	*p = m;
	logline("cudaIpcOpenMemHandle -> ptr=%p", (void*)m);
	LEAVE(cudaSuccess);
}

cudaError_t cudaIpcCloseMemHandle(void* p) {
	ENTER();
	run_all();
	logline("cudaIpcCloseMemHandle ptr=%p", p);
	for (alloc** ap = &allocs; *ap; ap = &(*ap)->next) {
		alloc* a = *ap;
		if (a->p == p && a->ipc) {
			*ap = a->next;
			munmap(a->p, a->n ? a->n : 1);
			free(a);
			LEAVE(sticky);
		}
	}
	logline("ERROR cudaIpcCloseMemHandle of %p, not opened by cudaIpcOpenMemHandle", p);
	LEAVE(cudaErrorInvalidValue);
}

// cudaGetDeviceProperties: the name and the UUID (all cudaDeviceProp
// begins with), the rest zero.
static cudaError_t props(char* prop, int dev) {
	ENTER();
	logline("cudaGetDeviceProperties device=%d", dev);
	if (dev < 0 || dev >= devices) LEAVE(cudaErrorInvalidDevice);
	snprintf(prop, 256, "fakecudart stand-in %d", dev);
	for (int i = 0; i < 16; i++) prop[256 + i] = (char)(0x10 * (dev + 1) + i);
	LEAVE(cudaSuccess);
}
cudaError_t cudaGetDeviceProperties(char* prop, int dev) { return props(prop, dev); }
cudaError_t cudaGetDeviceProperties_v2(char* prop, int dev) { return props(prop, dev); }

cudaError_t cudaMemGetInfo(size_t* freeb, size_t* total) {
	ENTER();
	CHECK_STICKY();
	logline("cudaMemGetInfo");
	*freeb = device_mem - device_used;
	*total = device_mem;
	LEAVE(cudaSuccess);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, int kind) {
	ENTER();
	CHECK_STICKY();
	run_all(); // the legacy default stream waits for the others
	logline("cudaMemcpy dst=%p src=%p n=%zu kind=%d", dst, src, n, kind);
	if ((kind == kindH2D && !find(dst, n, 0)) || (kind == kindD2H && !find(src, n, 0)) || (kind != kindH2D && kind != kindD2H)) {
		logline("ERROR cudaMemcpy outside any device allocation");
		LEAVE(cudaErrorInvalidValue);
	}
	memcpy(dst, src, n);
	LEAVE(cudaSuccess);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, fstream* s) {
	ENTER();
	CHECK_STICKY();
	logline("cudaMemcpyAsync dst=%p src=%p n=%zu kind=%d stream=%d", dst, src, n, kind, s ? s->id : 0);
	if (!s || !live_stream(s)) {
		logline("ERROR cudaMemcpyAsync on the default or an unknown stream");
		LEAVE(cudaErrorInvalidResourceHandle);
	}
	if (kind != kindH2D || !find(dst, n, 0)) {
		logline("ERROR cudaMemcpyAsync destination outside any device allocation");
		LEAVE(cudaErrorInvalidValue);
	}
	if (!find(src, n, 1) && !find(src, n, 2)) {
		logline("ERROR cudaMemcpyAsync source is not pinned or registered memory");
		LEAVE(cudaErrorInvalidValue);
	}
	op o = {0, (char*)dst, (const char*)src, n, checksum(src, n), NULL, 0};
	LEAVE(push(s, o));
}

static cudaError_t new_stream(fstream** out, const char* name) {
	ENTER();
	CHECK_STICKY();
	if (nstreams == 1024) LEAVE(cudaErrorMemoryAllocation);
	fstream* s = calloc(1, sizeof *s);
	if (!s) LEAVE(cudaErrorMemoryAllocation);
	s->id = next_id++;
	streams[nstreams++] = s;
	*out = s;
	logline("%s stream=%d", name, s->id);
	LEAVE(cudaSuccess);
}

cudaError_t cudaStreamCreate(fstream** s) { return new_stream(s, "cudaStreamCreate"); }
cudaError_t cudaStreamCreateWithFlags(fstream** s, unsigned int flags) {
	(void)flags;
	return new_stream(s, "cudaStreamCreateWithFlags");
}

cudaError_t cudaStreamSynchronize(fstream* s) {
	ENTER();
	if (!s || !live_stream(s)) LEAVE(cudaErrorInvalidResourceHandle);
	logline("cudaStreamSynchronize stream=%d", s->id);
	run(s, NULL, 0);
	LEAVE(sticky);
}

cudaError_t cudaStreamDestroy(fstream* s) {
	ENTER();
	for (int i = 0; i < nstreams; i++) {
		if (streams[i] == s) {
			run(s, NULL, 0);
			logline("cudaStreamDestroy stream=%d", s->id);
			streams[i] = streams[--nstreams];
			free(s->q);
			free(s);
			LEAVE(sticky);
		}
	}
	LEAVE(cudaErrorInvalidResourceHandle);
}

static cudaError_t new_event(fevent** out) {
	ENTER();
	CHECK_STICKY();
	fevent* e = calloc(1, sizeof *e);
	if (!e) LEAVE(cudaErrorMemoryAllocation);
	e->id = next_id++;
	*out = e;
	logline("cudaEventCreate event=%d", e->id);
	LEAVE(cudaSuccess);
}

cudaError_t cudaEventCreate(fevent** e) { return new_event(e); }
cudaError_t cudaEventCreateWithFlags(fevent** e, unsigned int flags) {
	(void)flags;
	return new_event(e);
}

cudaError_t cudaEventRecord(fevent* e, fstream* s) {
	ENTER();
	CHECK_STICKY();
	if (!e || !s || !live_stream(s)) LEAVE(cudaErrorInvalidResourceHandle);
	e->s = s;
	e->gen++;
	e->pending = 1;
	logline("cudaEventRecord event=%d stream=%d", e->id, s->id);
	op o = {1, NULL, NULL, 0, 0, e, e->gen};
	LEAVE(push(s, o));
}

cudaError_t cudaEventSynchronize(fevent* e) {
	ENTER();
	if (!e) LEAVE(cudaErrorInvalidResourceHandle);
	logline("cudaEventSynchronize event=%d", e->id);
	if (e->pending && e->s && live_stream(e->s)) run(e->s, e, e->gen);
	LEAVE(sticky);
}

cudaError_t cudaEventDestroy(fevent* e) {
	ENTER();
	run_all(); // no queued record may point at a freed event
	logline("cudaEventDestroy event=%d", e ? e->id : 0);
	free(e);
	LEAVE(cudaSuccess);
}

cudaError_t cudaDeviceSynchronize(void) {
	ENTER();
	logline("cudaDeviceSynchronize");
	run_all();
	LEAVE(sticky);
}
