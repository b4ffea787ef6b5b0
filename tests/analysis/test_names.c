/* test_names: op keys, derived op types and scope prefixes from op names (names.c). */
#include "analysis_internal.h"
#include "golden.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME(s) s, sizeof(s) - 1 /* bytes and length, NULs included */

typedef struct name_case {
    const char *name;
    uint32_t len;
    const char *key; /* NULL: the name kept whole, under its own stream id */
    uint32_t key_len;
    const char *type; /* NULL: the name itself, under its own stream id */
    uint32_t type_len;
    const char *scopes[4]; /* expected prefixes, level i + 1; NULL ends */
    uint32_t scope_lens[4];
} name_case;

/* Scope strings in the table are C literals without NULs except where a length is given. */
static const name_case cases[] = {
    /* PyTorch NVTX names: the fields after the op name go. */
    {NAME("aten::addmm, seq = 42, op_id = 17"), NAME("aten::addmm"), NAME("aten::addmm"), {0}, {0}},
    {NAME("aten::addmm, seq = 42, op_id = 17, sizes = [[64, 32], []]"),
     NAME("aten::addmm"),
     NAME("aten::addmm"),
     {0},
     {0}},
    {NAME("aten::add_, seq = 1"), NAME("aten::add_"), NAME("aten::add_"), {0}, {0}},
    {NAME("aten::mm, op_id = 3"), NAME("aten::mm"), NAME("aten::mm"), {0}, {0}},
    {NAME("aten::relu, input_op_ids = [(3, 0)]"), NAME("aten::relu"), NAME("aten::relu"), {0}, {0}},
    {NAME("AddmmBackward0, seq = 7"), NAME("AddmmBackward0"), NAME("AddmmBackward0"), {0}, {0}},
    /* A '/' inside the fields is no scope: scopes come from the key. */
    {NAME("aten::cat, sizes = [[2, 3], [4/5]]"), NAME("aten::cat"), NAME("aten::cat"), {0}, {0}},
    /* Not PyTorch's fields: kept whole. A name starting with a field has nothing to keep. */
    {NAME("load batch, size = 32"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME(", seq = 3"), NULL, 0, NULL, 0, {0}, {0}},
    /* MindSpore full names: kept whole as keys; the type is the last component, numbering off. */
    {NAME("Default/network/lenet5/Conv2D-op11"),
     NULL,
     0,
     NAME("Conv2D"),
     {"Default", "Default/network", "Default/network/lenet5"},
     {7, 15, 22}},
    {NAME("Default/network/Conv2D-op11"),
     NULL,
     0,
     NAME("Conv2D"),
     {"Default", "Default/network"},
     {7, 15}},
    {NAME("loss_scale/gradients/AddN_70"),
     NULL,
     0,
     NAME("AddN"),
     {"loss_scale", "loss_scale/gradients"},
     {10, 20}},
    {NAME("fp32_vars/conv2d/BatchNorm"),
     NULL,
     0,
     NAME("BatchNorm"),
     {"fp32_vars", "fp32_vars/conv2d"},
     {9, 16}},
    {NAME("Default/Conv2D-op11_3"), NULL, 0, NAME("Conv2D"), {"Default"}, {7}},
    /* Trailing numbering elsewhere; dotted module paths. */
    {NAME("MatMul_7"), NULL, 0, NAME("MatMul"), {0}, {0}},
    {NAME("MatMul_7_1"), NULL, 0, NAME("MatMul"), {0}, {0}},
    {NAME("layer3.MatMul_7"), NULL, 0, NAME("MatMul"), {0}, {0}},
    {NAME("encoder.layers.3"), NULL, 0, NAME("layers"), {0}, {0}},
    {NAME("torch.nn.Linear"), NULL, 0, NAME("Linear"), {0}, {0}},
    /* Digits that belong to the type, and names that keep themselves. */
    {NAME("ReLU6"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("AddmmBackward0"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("Conv2D"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("aten::add.Tensor"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("123"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("_7"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("-op5"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("1.5"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("a.b."), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("Add-op"), NULL, 0, NULL, 0, {0}, {0}},
    /* Slashes: trailing ones are dropped, empty components make no scope. */
    {NAME("A/B/"), NULL, 0, NAME("B"), {"A"}, {1}},
    {NAME("A/B//"), NULL, 0, NAME("B"), {"A"}, {1}},
    {NAME("/"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("///"), NULL, 0, NULL, 0, {0}, {0}},
    {NAME("/A/B"), NULL, 0, NAME("B"), {"/A"}, {2}},
    {NAME("A//B/C-op1"), NULL, 0, NAME("C"), {"A", "A//B"}, {1, 4}},
    {NAME("A/7"), NULL, 0, NAME("7"), {"A"}, {1}},
    /* Odd bytes pass through: invalid UTF-8, NUL, comma, quote, newline. */
    {NAME("Default/\xff\xfe/Mul-op3"),
     NULL,
     0,
     NAME("Mul"),
     {"Default", "Default/\xff\xfe"},
     {7, 10}},
    {NAME("ab\0c/Op_1"), NULL, 0, NAME("Op"), {"ab\0c"}, {4}},
    {NAME("x,\"y\"\n/Sum-op2, seq = 9"),
     NAME("x,\"y\"\n/Sum-op2"),
     NAME("Sum"),
     {"x,\"y\"\n"},
     {6}},
    {NAME("\xe4\xb8\xad/\xe6\x96\x87_2"), NULL, 0, NAME("\xe6\x96\x87"), {"\xe4\xb8\xad"}, {3}},
};

#define NCASES (sizeof cases / sizeof cases[0])

typedef struct scope_list {
    uint32_t id[64], level[64];
    uint32_t n;
} scope_list;

static void collect(void *ctx, uint32_t scope, uint32_t level)
{
    scope_list *l = ctx;
    ck_assert_uint_lt(l->n, 64);
    l->id[l->n] = scope;
    l->level[l->n++] = level;
}

static void assert_bytes(const analysis *a, uint32_t id, const char *want, uint32_t want_len,
                         const char *what, const name_case *c)
{
    uint32_t len;
    const char *got = analysis_raw_name(a, id, &len);
    ck_assert_msg(got != NULL, "%s of case %.*s: id %u unknown", what, (int)c->len, c->name, id);
    ck_assert_msg(len == want_len && !memcmp(got, want, len), "%s of case %.*s: got %.*s", what,
                  (int)c->len, c->name, (int)len, got);
}

START_TEST(test_name_table)
{
    const name_case *c = &cases[_i];
    golden g;
    golden_init(&g);
    uint32_t id = golden_name_n(&g, c->name, c->len);
    analysis *a = analysis_create(NULL, golden_names, &g);
    ck_assert_ptr_nonnull(a);

    uint32_t key = names_op_key(a, id);
    if (c->key) {
        ck_assert_msg(key & ANALYSIS_LOCAL_ID, "a cut key is a local id");
        assert_bytes(a, key, c->key, c->key_len, "key", c);
    } else {
        ck_assert_uint_eq(key, id);
    }

    uint32_t type = names_op_type(a, id, TS_STR_NONE);
    if (c->type)
        assert_bytes(a, type, c->type, c->type_len, "type", c);
    else
        ck_assert_uint_eq(type, id);

    /* The same answers asked again, and from the key instead of the name. */
    ck_assert_uint_eq(names_op_key(a, id), key);
    ck_assert_uint_eq(names_op_type(a, id, TS_STR_NONE), type);
    ck_assert_uint_eq(names_op_key(a, key), key);
    uint32_t from_key = names_op_type(a, key, TS_STR_NONE);
    uint32_t tl, fl;
    const char *t = analysis_name(a, type, &tl);
    const char *f = analysis_name(a, from_key, &fl);
    ck_assert(tl == fl && !memcmp(t, f, tl));

    scope_list l = {0};
    names_scopes(a, id, collect, &l);
    uint32_t want = 0;
    while (want < 4 && c->scopes[want])
        want++;
    ck_assert_msg(l.n == want, "case %.*s: %u scopes, want %u", (int)c->len, c->name, l.n, want);
    for (uint32_t i = 0; i < l.n; i++) {
        ck_assert_uint_eq(l.level[i], i + 1);
        ck_assert(l.id[i] & ANALYSIS_LOCAL_ID);
        assert_bytes(a, l.id[i], c->scopes[i], c->scope_lens[i], "scope", c);
    }

    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_given_type_wins)
{
    golden g;
    golden_init(&g);
    uint32_t name = golden_name(&g, "layer3.MatMul_7");
    uint32_t dense = golden_name(&g, "Dense");
    analysis *a = analysis_create(NULL, golden_names, &g);
    ck_assert_uint_eq(names_op_type(a, name, dense), dense);
    /* Even when the given type is a local id. */
    uint32_t local = analysis_local_name(a, "Given", 5);
    ck_assert_uint_eq(names_op_type(a, name, local), local);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_same_bytes_same_id)
{
    golden g;
    golden_init(&g);
    uint32_t s1 = golden_name(&g, "aten::addmm, seq = 1, op_id = 2");
    uint32_t s2 = golden_name(&g, "aten::addmm, seq = 99, op_id = 100, sizes = [[1]]");
    uint32_t m1 = golden_name(&g, "a/b/MatMul_1");
    uint32_t m2 = golden_name(&g, "c/MatMul-op2");
    analysis *a = analysis_create(NULL, golden_names, &g);
    ck_assert_uint_eq(names_op_key(a, s1), names_op_key(a, s2));
    ck_assert_uint_eq(names_op_type(a, s1, 0), names_op_type(a, s2, 0));
    ck_assert_uint_eq(names_op_type(a, m1, 0), names_op_type(a, m2, 0));
    ck_assert_str_eq(golden_str(a, names_op_type(a, m1, 0)), "MatMul");
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

START_TEST(test_unknown_and_empty)
{
    golden g;
    golden_init(&g);
    golden_name(&g, "x");
    analysis *a = analysis_create(NULL, golden_names, &g);
    /* An id the names callback does not know keeps itself and has no scopes. */
    ck_assert_uint_eq(names_op_key(a, 9999), 9999);
    ck_assert_uint_eq(names_op_type(a, 9999, 0), 9999);
    scope_list l = {0};
    names_scopes(a, 9999, collect, &l);
    ck_assert_uint_eq(l.n, 0);
    /* The empty name (id 0). */
    ck_assert_uint_eq(names_op_key(a, TS_STR_NONE), TS_STR_NONE);
    ck_assert_uint_eq(names_op_type(a, TS_STR_NONE, TS_STR_NONE), TS_STR_NONE);
    names_scopes(a, TS_STR_NONE, collect, &l);
    ck_assert_uint_eq(l.n, 0);
    analysis_destroy(a);

    /* No names callback at all. */
    a = analysis_create(NULL, NULL, NULL);
    ck_assert_uint_eq(names_op_key(a, 5), 5);
    ck_assert_uint_eq(names_op_type(a, 5, 0), 5);
    names_scopes(a, 5, collect, &l);
    ck_assert_uint_eq(l.n, 0);
    analysis_destroy(a);
    golden_free(&g);
}
END_TEST

typedef struct long_ctx {
    const analysis *a;
    uint32_t n, bad;
} long_ctx;

/* Scope i (level i + 1) of test_very_long is "s000/.../s<i>": 5 * (i + 1) - 1 bytes. */
static void check_long(void *p, uint32_t scope, uint32_t level)
{
    long_ctx *ctx = p;
    uint32_t len;
    const char *s = analysis_name(ctx->a, scope, &len);
    char want[16];
    snprintf(want, sizeof want, "s%03u", (level - 1) % 1000);
    if (level != ctx->n + 1 || len != 5 * level - 1 || memcmp(s + len - 4, want, 4))
        ctx->bad++;
    ctx->n++;
}

/* 400 components "s000/s001/.../s399/Op_9, seq = 3": 400 scopes. From the key (a local id)
 * first: interning its many new prefixes moves the local table under the key's own bytes. */
START_TEST(test_very_long)
{
    enum { N = 400 };
    char *name = malloc(N * 5 + 16);
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(name + len, "s%03d/", i);
    len += (size_t)sprintf(name + len, "Op_9, seq = 3");
    golden g;
    golden_init(&g);
    uint32_t id = golden_name_n(&g, name, (uint32_t)len);
    analysis *a = analysis_create(NULL, golden_names, &g);

    uint32_t key = names_op_key(a, id);
    uint32_t kl;
    analysis_name(a, key, &kl);
    ck_assert_uint_eq(kl, N * 5 + 4); /* the scopes, then "Op_9" */
    ck_assert_str_eq(golden_str(a, names_op_type(a, id, 0)), "Op");
    ck_assert_str_eq(golden_str(a, names_op_type(a, key, 0)), "Op");

    /* The key first, while its prefixes are new and the local table grows under it. */
    long_ctx ctx = {a, 0, 0};
    names_scopes(a, key, check_long, &ctx);
    ck_assert_uint_eq(ctx.n, N);
    ck_assert_uint_eq(ctx.bad, 0);
    ctx = (long_ctx){a, 0, 0};
    names_scopes(a, id, check_long, &ctx);
    ck_assert_uint_eq(ctx.n, N);
    ck_assert_uint_eq(ctx.bad, 0);

    analysis_destroy(a);
    golden_free(&g);
    free(name);
}
END_TEST

typedef struct contains_case {
    const char *hay;
    uint32_t len;
    const char *needle;
    int want;
} contains_case;

static const contains_case contains_cases[] = {
    {NAME("Conv2D"), "conv", 1},
    {NAME("Conv2D"), "2D", 1},
    {NAME("Conv2D"), "2d", 1},
    {NAME("MatMul"), "MATMUL", 1},
    {NAME("abc"), "", 1},
    {NAME("abc"), NULL, 1},
    {NAME(""), "", 1},
    {NAME(""), "a", 0},
    {NAME("ab"), "abc", 0},
    {"abc", 2, "c", 0}, /* only len bytes count */
    {NAME("a\0Bc"), "bc", 1},
    {NAME("a\0Bc"), "a", 1},
    {NAME("a\0Bc"), "ab", 0},
    {NAME("x,\"y\"\n"), "\"Y\"\n", 1},
    {NAME("\xc3\x89t\xc3\xa9"), "\xc3\xa9", 1},
    {NAME("\xc3\x89"), "\xc3\xa9", 0}, /* ASCII folding only: no Unicode case rules */
    {NAME("\xff\xfe"), "\xfe", 1},
    {NAME("aaab"), "aab", 1}, /* a partial match first, then the real one */
    {NAME("[Z]"), "[z]", 1},
    {NAME("@"), "`", 0}, /* '@' and '`' are 32 apart but no letters */
};

START_TEST(test_contains)
{
    const contains_case *c = &contains_cases[_i];
    ck_assert_msg(names_contains(c->hay, c->len, c->needle) == c->want, "%.*s in %s", (int)c->len,
                  c->hay, c->needle ? c->needle : "(null)");
}
END_TEST

START_TEST(test_contains_null_hay)
{
    ck_assert_int_eq(names_contains(NULL, 0, "a"), 0);
    ck_assert_int_eq(names_contains(NULL, 0, ""), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("names");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_name_table, 0, (int)NCASES);
    tcase_add_test(tc, test_given_type_wins);
    tcase_add_test(tc, test_same_bytes_same_id);
    tcase_add_test(tc, test_unknown_and_empty);
    tcase_add_test(tc, test_very_long);
    tcase_add_loop_test(tc, test_contains, 0,
                        (int)(sizeof contains_cases / sizeof contains_cases[0]));
    tcase_add_test(tc, test_contains_null_hay);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
