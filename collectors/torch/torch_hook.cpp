/* libtermsight-torch.so: PyTorch's operators as termsight ranges, through PyTorch's own
 * RecordFunction callbacks (the hook torch.profiler uses), so that a traced operator costs a
 * C++ call, not a trip through Python.
 *
 * Built only where libtorch's headers are installed (Debian's libtorch-dev), against the same
 * libtorch that python3-torch loads; termsight.torch loads it with ctypes after `import torch`
 * and falls back to its Python dispatch mode where it is absent or fails to load. It uses only
 * libtermsight.so's public API (linked: the same instance the binding loaded, by soname).
 *
 * What it records, on every thread, while enabled and collecting:
 * - every dispatcher operator (aten::, c10d::, ...) as a range named "<module>/<op>" and typed
 *   "<op>", nested as PyTorch runs them (aten::conv2d > aten::convolution > ... >
 *   aten::mkldnn_convolution), so that self time means what it means elsewhere;
 * - autograd's backward nodes (ConvolutionBackward0) and what they run, named by the module
 *   whose forward operator made the node: the forward operator's sequence number, kept per
 *   module when it ran, is the node's (as torch.profiler pairs them);
 * - record_function blocks (the user's labels, Optimizer.step#SGD.step) as ranges typed
 *   "record_function", except the DataLoader's own block, whose wait termsight.torch records
 *   itself: that block and everything in it (collate in the main process) is left out;
 * - collective operators (c10d::) as communication, never computation: from the call to the
 *   completion of the Work it returns once termsight_torch_track_comm(1) asked for it (the
 *   operator itself only queues the collective; the Work's future completes on the backend's
 *   thread, which records it, in C++: no Python runs there), else for the call alone.
 * The module path comes from termsight.torch's module hooks (scope_push/scope_pop).
 *
 * No allocation on the path of an operator seen before: names are interned once per thread and
 * session into a fixed table; a thread's open operators are a fixed stack. */

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <pthread.h>
#include <string>
#include <vector>

#include "hash.h"
#include "termsight/termsight.h"

#define TS_EXPORT extern "C" __attribute__((visibility("default")))

namespace
{

/* ---- module scopes ------------------------------------------------------------------------ */

/* Scope names by index, 0 for none. Indices are handed out under the lock and never reused;
 * entries are read without it, so the table never moves (a fixed array of strings). */
constexpr uint32_t kMaxScopes = 1u << 16;
std::mutex scope_lock;
std::string *scope_names[kMaxScopes];
std::atomic<uint32_t> scope_count{1};

/* The forward operator's module by autograd sequence number, for its backward node: entry =
 * seq << 24 | scope (both bounded). A fixed ring: an entry overwritten by a newer sequence
 * number before its backward runs leaves that node without a module, never with a wrong one. */
constexpr uint32_t kSeqSlots = 1u << 16;
std::atomic<uint64_t> seq_scope[kSeqSlots];

void seq_remember(int64_t seq, uint32_t scope)
{
    if (seq < 0 || scope >= (1u << 24))
        return;
    uint64_t want = (uint64_t)seq << 24 | scope;
    std::atomic<uint64_t> &slot = seq_scope[(uint64_t)seq % kSeqSlots];
    uint64_t have = slot.load(std::memory_order_relaxed);
    /* The first operator of a sequence number is the outermost; a later one with a module wins
     * over one without (an optimizer's in-place op can take the number the next forward uses). */
    if ((have >> 24) != (uint64_t)seq || (scope && !(have & 0xffffff)))
        slot.store(want, std::memory_order_relaxed);
}

uint32_t seq_module(int64_t seq)
{
    if (seq < 0)
        return 0;
    uint64_t have = seq_scope[(uint64_t)seq % kSeqSlots].load(std::memory_order_relaxed);
    return (have >> 24) == (uint64_t)seq ? (uint32_t)(have & 0xffffff) : 0;
}

/* ---- per-thread state --------------------------------------------------------------------- */

enum action : uint8_t {
    A_NONE,  /* nothing recorded (a thread's stack entry all the same) */
    A_RANGE, /* an operator range */
    A_COMM,  /* a collective: communication from t0 to its end */
    A_SKIP,  /* the DataLoader's block: it and what it holds are not recorded */
};

struct name_entry {
    uint64_t hash;
    uint32_t scope;
    uint32_t name_id, type_id;
    uint8_t kind; /* 0: empty, else 1 + action */
    std::string *text;
};

constexpr uint32_t kNames = 4096; /* per thread; a full table interns without caching */
constexpr uint32_t kDepth = 256;  /* open operators per thread that are followed */

struct open_op {
    const at::RecordFunction *fn;
    uint64_t t0;
    uint32_t name_id, type_id;
    uint8_t act;
    uint8_t scope_pushed;
};

struct thread_state {
    uint64_t generation = 0;
    uint32_t scopes[kDepth];
    uint32_t nscopes = 0;
    open_op ops[kDepth];
    uint32_t nops = 0;
    uint32_t skipping = 0; /* open A_SKIP blocks */
    name_entry names[kNames] = {};
    uint32_t nnames = 0;

    ~thread_state()
    {
        for (name_entry &e : names)
            delete e.text;
    }
    thread_state() = default;
    thread_state(const thread_state &) = delete;
    thread_state &operator=(const thread_state &) = delete;
    uint32_t scope() const
    {
        return nscopes ? scopes[nscopes - 1] : 0;
    }
};

thread_local thread_state *tls;

/* Frees a thread's state when the thread ends. */
struct tls_owner {
    ~tls_owner()
    {
        delete tls;
        tls = nullptr;
    }
};
thread_local tls_owner owner;

/* The calling thread's state, made on its first operator or module; nullptr without memory. */
thread_state *state()
{
    if (!tls) {
        (void)&owner; /* constructed with the thread's first use: its destructor frees tls */
        tls = new (std::nothrow) thread_state;
    }
    return tls;
}

/* ---- global switches ---------------------------------------------------------------------- */

std::atomic<int> enabled{0};
std::atomic<uint64_t> generation{1};
std::atomic<uint64_t> recorded{0};
std::mutex install_lock;
bool installed;
/* Two registrations of the same callbacks, one enabled at a time: handle_outputs also has
 * PyTorch keep each operator's outputs, which the collectives' completion needs (their Work)
 * and which costs every operator a little, so it is used only once asked for. */
at::CallbackHandle handle, handle_outputs;
int track_comm; /* under install_lock: use handle_outputs */
termsight_session *last_session;

bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

const char kDataLoaderBlock[] = "enumerate(DataLoader)#";
/* The autograd engine's frame around each backward node ("...: ConvolutionBackward0"): one
 * type for all of them, the node inside has its own. */
const char kEngineFrame[] = "autograd::engine::evaluate_function";

action classify(const at::RecordFunction &fn, const char *name)
{
    if (fn.scope() == at::RecordScope::USER_SCOPE)
        return starts(name, kDataLoaderBlock) ? A_SKIP : A_RANGE;
    if (starts(name, "profiler::"))
        return A_NONE; /* record_function's own operators: the block is the range */
    if (starts(name, "c10d::"))
        return A_COMM;
    return A_RANGE;
}

/* The bytes of a collective's result (a tensor or a list of them), 0 when it is neither. */
uint64_t result_bytes(const c10::IValue &v)
{
    uint64_t n = 0;
    if (v.isTensor())
        return (uint64_t)v.toTensor().nbytes();
    if (v.isTensorList())
        for (const at::Tensor &t : v.toTensorList().vec())
            n += (uint64_t)t.nbytes();
    else if (v.isList())
        for (const c10::IValue &e : v.toListRef())
            if (e.isTensor())
                n += (uint64_t)e.toTensor().nbytes();
    return n;
}

/* When fn (a collective that just returned) handed back a Work whose future is still running,
 * its completion records the communication [t0, completion] on the thread that completes it;
 * returns whether it will. */
bool complete_later(const at::RecordFunction &fn, uint32_t name_id, uint32_t type_id, uint64_t t0)
{
    for (const c10::IValue &out : fn.outputs()) {
        if (!out.isCustomClass())
            continue;
        c10::intrusive_ptr<c10d::Work> work;
        try {
            work = out.toCustomClass<c10d::Work>();
        } catch (...) {
            continue; /* another custom class */
        }
        c10::intrusive_ptr<c10::ivalue::Future> fut;
        if (work)
            fut = work->getFuture();
        if (!fut || fut->completed())
            return false;
        /* In flight until then: a rank whose peers never join shows that it waits here. */
        uint64_t ticket = termsight_comm_issue(name_id, t0);
        struct undo { /* the ticket goes back unless the callback that ends it is in place */
            uint64_t t;
            ~undo()
            {
                termsight_comm_done(t);
            }
        } pending{ticket};
        fut->addCallback([name_id, type_id, t0, ticket](c10::ivalue::Future &f) {
            termsight_comm_done(ticket);
            uint64_t end = termsight_now_ns();
            uint64_t bytes = 0;
            try {
                if (!f.hasError())
                    bytes = result_bytes(f.constValue());
            } catch (...) {
            }
            termsight_comm_complete(name_id, type_id, t0, end, bytes);
        });
        pending.t = 0;
        return true;
    }
    return false;
}

/* The (name, type) ids of name in scope, interned for this session, and what to do with it. */
void lookup(thread_state *t, const at::RecordFunction &fn, const char *name, uint32_t scope,
            uint32_t *name_id, uint32_t *type_id, action *act)
{
    uint64_t gen = generation.load(std::memory_order_relaxed);
    if (t->generation != gen) {
        for (name_entry &e : t->names) {
            delete e.text;
            e = name_entry{};
        }
        t->nnames = 0;
        t->generation = gen;
    }
    size_t len = strlen(name);
    uint64_t h = hash_bytes_seeded(name, len, scope);
    uint32_t i = (uint32_t)h & (kNames - 1);
    for (uint32_t probe = 0; probe < kNames; probe++, i = (i + 1) & (kNames - 1)) {
        name_entry &e = t->names[i];
        if (!e.kind)
            break;
        if (e.hash == h && e.scope == scope && *e.text == name) {
            *name_id = e.name_id;
            *type_id = e.type_id;
            *act = (action)(e.kind - 1);
            return;
        }
    }
    *act = classify(fn, name);
    const char *type = fn.scope() == at::RecordScope::USER_SCOPE ? "record_function"
                       : starts(name, kEngineFrame)              ? kEngineFrame
                                                                 : name;
    *type_id = termsight_name(type);
    if (scope && scope < scope_count.load(std::memory_order_acquire)) {
        std::string full = *scope_names[scope] + "/" + name;
        *name_id = termsight_name_n(full.data(), full.size());
    } else {
        *name_id = termsight_name_n(name, len);
    }
    if (t->nnames >= kNames / 2)
        return; /* a full table: interned each time from here on */
    name_entry &e = t->names[i];
    e = name_entry{h, scope, *name_id, *type_id, (uint8_t)(1 + *act), new std::string(name)};
    t->nnames++;
}

void start(const at::RecordFunction &fn)
{
    thread_state *t = state();
    if (!t || t->nops == kDepth)
        return; /* deeper than followed: its end finds nothing and does nothing */
    open_op &o = t->ops[t->nops++];
    o = open_op{&fn, 0, 0, 0, A_NONE, 0};
    if (t->skipping || !__atomic_load_n(&termsight_collecting_, __ATOMIC_RELAXED))
        return;
    const char *name = fn.name();
    if (!name)
        return;
    uint32_t scope = t->scope();
    if (starts(name, "c10d::")) {
        scope = 0; /* a collective belongs to no module, wherever autograd issued it */
    } else if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
        /* A backward node runs outside every module: its module is its forward's. */
        uint32_t fwd = seq_module(fn.seqNr());
        if (fwd && t->nscopes < kDepth) {
            t->scopes[t->nscopes++] = fwd;
            o.scope_pushed = 1;
            scope = fwd;
        }
    } else if (fn.scope() == at::RecordScope::FUNCTION) {
        seq_remember(fn.seqNr(), scope);
    }
    action act;
    lookup(t, fn, name, scope, &o.name_id, &o.type_id, &act);
    o.act = act;
    switch (act) {
    case A_RANGE:
        termsight_range_begin_id(o.name_id, o.type_id);
        recorded.fetch_add(1, std::memory_order_relaxed);
        break;
    case A_COMM:
        o.t0 = termsight_now_ns();
        break;
    case A_SKIP:
        t->skipping++;
        break;
    case A_NONE:
        break;
    }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn)
{
    if (!enabled.load(std::memory_order_relaxed) || fn.isAsync())
        return nullptr;
    try {
        start(fn);
    } catch (...) {
        /* Out of memory naming an operator: that operator goes unrecorded, the run goes on. */
    }
    return nullptr;
}

/* Ends o; fn is o's RecordFunction when o is the operator ending now, else NULL. */
void finish(thread_state *t, const open_op &o, const at::RecordFunction *fn)
{
    switch (o.act) {
    case A_RANGE:
        termsight_range_end();
        break;
    case A_COMM:
        try {
            if (fn && complete_later(*fn, o.name_id, o.type_id, o.t0))
                break;
        } catch (...) {
            /* No memory for the callback: the call alone is recorded. */
        }
        termsight_comm_complete(o.name_id, o.type_id, o.t0, termsight_now_ns(), 0);
        break;
    case A_SKIP:
        t->skipping--;
        break;
    case A_NONE:
        break;
    }
    if (o.scope_pushed && t->nscopes)
        t->nscopes--;
}

void on_end(const at::RecordFunction &fn, at::ObserverContext *)
{
    thread_state *t = tls;
    if (!t)
        return;
    /* Ends come in the order starts came on this thread; one that does not match the top (an
     * operator whose end ran on another thread) is looked for a few entries down, and what lies
     * above it is ended with it. Not found: begun while off, nothing to end. */
    uint32_t floor = t->nops > 8 ? t->nops - 8 : 0;
    uint32_t at = t->nops;
    while (at > floor && t->ops[at - 1].fn != &fn)
        at--;
    if (at == floor)
        return;
    while (t->nops >= at) {
        finish(t, t->ops[t->nops - 1], t->nops == at ? &fn : nullptr);
        t->nops--;
    }
}

/* In a forked child (a DataLoader worker): recording off, and the forking thread's open
 * operators forgotten: their ends never come in the child, and a new operator's RecordFunction
 * may sit at the address of one of them (the stack is reused) and end it by mistake. */
void child_after_fork()
{
    enabled.store(0, std::memory_order_relaxed);
    if (tls) {
        tls->nops = 0;
        tls->nscopes = 0;
        tls->skipping = 0;
    }
}

} // namespace

/* Registers the callbacks with PyTorch, once; they stay off until termsight_torch_enable(1).
 * Returns 0, or -1 where PyTorch refused (the process then runs with the Python fallback). */
TS_EXPORT int termsight_torch_install(void)
{
    std::lock_guard<std::mutex> g(install_lock);
    if (installed)
        return 0;
    try {
        for (int outputs = 0; outputs < 2; outputs++) {
            at::CallbackHandle h = at::addGlobalCallback(
                at::RecordFunctionCallback(on_start, on_end)
                    .needsInputs(false)
                    .needsOutputs(outputs != 0)
                    .needsIds(false)
                    .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                             at::RecordScope::USER_SCOPE}));
            at::disableCallback(h);
            (outputs ? handle_outputs : handle) = h;
        }
    } catch (...) {
        return -1;
    }
    /* A forked child (a DataLoader worker) records no operators: its parent's switch is not its. */
    pthread_atfork(nullptr, nullptr, child_after_fork);
    installed = true;
    return 0;
}

/* Turns operator recording on (nonzero) or off, on every thread; returns the previous setting.
 * Off costs the operators nothing (PyTorch skips a disabled callback). A session created or
 * replaced since the last call gets its own name ids. */
TS_EXPORT int termsight_torch_enable(int on)
{
    std::lock_guard<std::mutex> g(install_lock);
    if (!installed)
        return 0;
    termsight_session *s = termsight_session_current();
    if (s != last_session) {
        last_session = s;
        generation.fetch_add(1, std::memory_order_relaxed);
    }
    int was = enabled.load(std::memory_order_relaxed);
    on = on ? 1 : 0;
    if (on != was) {
        at::CallbackHandle h = track_comm ? handle_outputs : handle;
        if (on)
            at::reenableCallback(h);
        else
            at::disableCallback(h);
        enabled.store(on, std::memory_order_relaxed);
    }
    return was;
}

/* Collectives recorded to their completion (nonzero: what a distributed program wants; the
 * price is PyTorch keeping every operator's outputs while recording) or for their call alone.
 * Returns the previous setting. */
TS_EXPORT int termsight_torch_track_comm(int on)
{
    std::lock_guard<std::mutex> g(install_lock);
    if (!installed)
        return 0;
    int was = track_comm;
    on = on ? 1 : 0;
    if (on != was && enabled.load(std::memory_order_relaxed)) {
        at::reenableCallback(on ? handle_outputs : handle);
        at::disableCallback(on ? handle : handle_outputs);
    }
    track_comm = on;
    return was;
}

/* The index of a module scope name ("features.0"), made once per name by the caller; 0 (no
 * scope) for an empty name or a full table. */
TS_EXPORT uint32_t termsight_torch_scope(const char *name, size_t len)
{
    if (!name || !len)
        return 0;
    std::lock_guard<std::mutex> g(scope_lock);
    uint32_t n = scope_count.load(std::memory_order_relaxed);
    if (n >= kMaxScopes || n >= (1u << 24))
        return 0;
    scope_names[n] = new std::string(name, len);
    scope_count.store(n + 1, std::memory_order_release);
    return n;
}

/* The calling thread enters (push) or leaves (pop) a module: its operators are named by the
 * innermost. */
TS_EXPORT void termsight_torch_scope_push(uint32_t scope)
{
    thread_state *t = state();
    if (t && t->nscopes < kDepth)
        t->scopes[t->nscopes++] = scope < scope_count.load(std::memory_order_acquire) ? scope : 0;
}

TS_EXPORT void termsight_torch_scope_pop(void)
{
    thread_state *t = tls;
    if (t && t->nscopes)
        t->nscopes--;
}

/* Operator ranges begun so far, on every thread: steps() tells a step that ran operators from
 * one that did not. */
TS_EXPORT uint64_t termsight_torch_recorded(void)
{
    return recorded.load(std::memory_order_relaxed);
}
