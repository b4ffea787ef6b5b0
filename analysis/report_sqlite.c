/* report_sqlite: report.sqlite, the report folder's tables in one SQLite database. Each CSV file
 * the folder holds becomes a table of the same columns and rows (so the two never disagree),
 * with a declared type per column, indexes on the columns people look rows up by, and views
 * for the usual questions. With --sqlite-only the report's tables come row by row from
 * report_csv.c instead, and no CSV file is written (the job report's always come from its CSV
 * files). The database is written inside the report's temporary folder under a temporary name,
 * in one transaction, then renamed to report.sqlite; the folder is swapped in whole afterwards
 * (report_dir.c), so a reader never sees a partial database. Any failure removes the temporary
 * file and is kept as the report's write error, which fails the commit. */
#include "report_internal.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define SQLITE_TMP  "report.sqlite.tmp"
#define MAX_COLUMNS 64
#define MAX_INDEXES 3

/* One CSV file and the table it becomes; the columns come from the file's header. */
typedef struct sql_table {
    const char *file, *table;
    const char *index[MAX_INDEXES]; /* columns indexed, one index each */
} sql_table;

static const sql_table sql_tables[] = {
    {"step_trace.csv", "steps", {"step", "total_us"}},
    {"overlap.csv", "overlap", {"step"}},
    {REPORT_STEP_OPS_CSV, "step_ops", {"step", "op"}},
    {"op_statistics.csv", "operators", {"op", "type"}},
    {"op_type_statistics.csv", "operator_types", {"type"}},
    {"kernel_statistics.csv", "kernels", {"kernel", "op"}},
    {"data_queues.csv", "queues", {"queue"}},
    {"data_queue_usage.csv", "queue_usage", {"queue", "begin_us"}},
    {"cpu_utilization.csv", "cpu", {"begin_us"}},
    {"cpu_threads.csv", "cpu_threads", {"tid"}},
    {"cpu_processes.csv", "cpu_processes", {"pid"}},
    {"memory.csv", "memory", {"t_us"}},
    {"memory_allocations.csv", "memory_allocations", {"name"}},
    {"flops.csv", "flops", {"scope"}},
    /* a job report's (job.c) */
    {"ranks.csv", "ranks", {"rank"}},
    {"job_steps.csv", "job_steps", {"step"}},
    {"job_step_trace.csv", "job_step_trace", {"step", "rank"}},
};
#define N_SQL_TABLES (sizeof sql_tables / sizeof sql_tables[0])

/* A view and the tables it needs (created only when they are there). */
typedef struct sql_view {
    const char *need[2];
    const char *sql;
} sql_view;

static const sql_view sql_views[] = {
    {{"steps"},
     "CREATE VIEW slowest_steps AS SELECT step, total_us, interval_us, compute_us, "
     "comm_wait_us, tail_us, eval_us, fpbp_us, source FROM steps ORDER BY total_us DESC"},
    {{"step_ops"},
     "CREATE VIEW top_ops_per_step AS SELECT step, place, op, type, count, total_us FROM "
     "(SELECT step, op, type, count, total_us, row_number() OVER (PARTITION BY step ORDER BY "
     "total_us DESC, op) AS place FROM step_ops) ORDER BY step, place"},
    {{"job_steps", "ranks"},
     "CREATE VIEW step_stragglers AS SELECT s.step AS step, s.slowest_rank AS straggler_rank, "
     "r.host AS host, s.slowest_busy_us AS straggler_busy_us, s.fastest_rank AS fastest_rank, "
     "s.fastest_busy_us AS fastest_busy_us, s.skew_us AS skew_us, s.ranks AS ranks FROM "
     "job_steps s LEFT JOIN ranks r ON r.rank = s.slowest_rank ORDER BY s.step"},
};
#define N_SQL_VIEWS (sizeof sql_views / sizeof sql_views[0])

/* Columns holding names or words; the rest are numbers. */
static const char *const text_columns[] = {
    "op",        "type",       "kernel",  "queue",      "role",          "producer",
    "consumer",  "verdict",    "finding", "suggestion", "thread",        "process",
    "name",      "scope",      "source",  "fp_op",      "bp_op",         "host",
    "straggler", "run_folder", "state",   "device",     "bottleneck_op",
};

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

/* The declared type of a column, by its name: microseconds, percentages and averages are REAL,
 * names TEXT, counts, steps, ids and bytes INTEGER. */
static const char *column_type(const char *name)
{
    for (size_t i = 0; i < sizeof text_columns / sizeof text_columns[0]; i++)
        if (!strcmp(name, text_columns[i]))
            return "TEXT";
    if (ends_with(name, "_us") || ends_with(name, "_pct") || ends_with(name, "_per_s") ||
        !strncmp(name, "avg_", 4))
        return "REAL";
    return "INTEGER";
}

/* A column name the header gives, usable as an SQL identifier unquoted. */
static int plain_identifier(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* One CSV record (fields may hold line ends inside quotes) into *line; 0 at the end. */
static int read_record(FILE *f, char **line, size_t *cap, char **more, size_t *mcap)
{
    ssize_t n = getline(line, cap, f);
    if (n < 0)
        return 0;
    size_t len = (size_t)n, quotes = 0;
    for (size_t i = 0; i < len; i++)
        quotes += (*line)[i] == '"';
    while (quotes % 2) {
        ssize_t m = getline(more, mcap, f);
        if (m < 0)
            break;
        for (ssize_t i = 0; i < m; i++)
            quotes += (*more)[i] == '"';
        if (len + (size_t)m + 1 > *cap) {
            char *p = realloc(*line, len + (size_t)m + 1);
            if (!p)
                return -1;
            *line = p;
            *cap = len + (size_t)m + 1;
        }
        memcpy(*line + len, *more, (size_t)m + 1);
        len += (size_t)m;
    }
    if (len && (*line)[len - 1] == '\n')
        (*line)[--len] = 0;
    return 1;
}

/* A table being filled: its statement and which columns are TEXT. */
struct sql_rows {
    sqlite3_stmt *st;
    const sql_table *t;
    int istext[MAX_COLUMNS];
    size_t ncol;
};

typedef struct sql_writer {
    sqlite3 *db;
    char *err;                   /* the first failure, malloc'd */
    sql_rows rows[N_SQL_TABLES]; /* the tables made, by sql_tables' index */
    int made[N_SQL_TABLES];
} sql_writer;

static int sql_fail(sql_writer *w, const char *what)
{
    if (!w->err && asprintf(&w->err, "%s: %s", what, w->db ? sqlite3_errmsg(w->db) : "?") < 0)
        w->err = NULL;
    return -1;
}

/* A failure reading the CSV file (errno), or one it holds no header in (err 0). */
static int file_fail(sql_writer *w, const char *file, int err)
{
    if (!w->err && asprintf(&w->err, "%s: %s", file, err ? strerror(err) : "no header line") < 0)
        w->err = NULL;
    return -1;
}

static int sql_exec(sql_writer *w, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(w->db, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    if (!w->err && asprintf(&w->err, "%s", msg ? msg : "SQL error") < 0)
        w->err = NULL;
    sqlite3_free(msg);
    return -1;
}

/* Table i with the columns the header's ncol fields name, and its insert statement: the
 * writer's rows[i], or NULL with w->err. */
static sql_rows *make_table(sql_writer *w, size_t i, char **field, size_t ncol)
{
    const sql_table *t = &sql_tables[i];
    sql_rows *rows = &w->rows[i];
    if (w->made[i] || !ncol) {
        if (!w->err &&
            asprintf(&w->err, "%s: %s", t->file, ncol ? "written twice" : "no columns") < 0)
            w->err = NULL;
        return NULL;
    }
    sqlite3_str *create = sqlite3_str_new(w->db), *insert = sqlite3_str_new(w->db);
    sqlite3_str_appendf(create, "CREATE TABLE %s (", t->table);
    sqlite3_str_appendf(insert, "INSERT INTO %s VALUES (", t->table);
    int bad = 0;
    for (size_t c = 0; c < ncol; c++) {
        bad |= !plain_identifier(field[c]);
        const char *type = column_type(field[c]);
        rows->istext[c] = !strcmp(type, "TEXT");
        sqlite3_str_appendf(create, "%s%s %s", c ? ", " : "", field[c], type);
        sqlite3_str_appendf(insert, "%s?", c ? ", " : "");
    }
    sqlite3_str_appendall(create, ")");
    sqlite3_str_appendall(insert, ")");
    char *csql = sqlite3_str_finish(create), *isql = sqlite3_str_finish(insert);
    int ok = !bad && csql && isql;
    if (!ok && !w->err && asprintf(&w->err, "%s: a column name is not an identifier", t->file) < 0)
        w->err = NULL;
    if (ok && (sql_exec(w, csql) < 0 ||
               sqlite3_prepare_v2(w->db, isql, -1, &rows->st, NULL) != SQLITE_OK)) {
        sql_fail(w, t->file);
        ok = 0;
    }
    sqlite3_free(csql);
    sqlite3_free(isql);
    if (!ok)
        return NULL;
    rows->t = t;
    rows->ncol = ncol;
    w->made[i] = 1;
    return rows;
}

/* Column c of the row under way: text (an empty field of a column that is not TEXT is NULL, as
 * in the CSV file), an integer or a real. */
static void put_text(sql_rows *rows, size_t c, const char *v)
{
    if (c >= rows->ncol)
        return;
    if (!*v && !rows->istext[c])
        sqlite3_bind_null(rows->st, (int)c + 1);
    else
        sqlite3_bind_text(rows->st, (int)c + 1, v, -1, SQLITE_TRANSIENT);
}

/* The row under way inserted: 0, or -1 with w->err. */
static int put_row(sql_writer *w, sql_rows *rows)
{
    int rc = sqlite3_step(rows->st) == SQLITE_DONE ? 0 : sql_fail(w, rows->t->file);
    sqlite3_reset(rows->st);
    sqlite3_clear_bindings(rows->st);
    return rc;
}

/* The CSV file of table i in the folder (absent: nothing to do) into the table. */
static int import_table(sql_writer *w, int dirfd, size_t i)
{
    const sql_table *t = &sql_tables[i];
    int fd = openat(dirfd, t->file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : file_fail(w, t->file, errno);
    FILE *f = fdopen(fd, "r");
    if (!f) {
        int e = errno;
        close(fd);
        return file_fail(w, t->file, e);
    }
    char *line = NULL, *more = NULL, *field[MAX_COLUMNS];
    size_t cap = 0, mcap = 0, ncol = 0;
    int rc = -1, got;
    sql_rows *rows = NULL;
    if (read_record(f, &line, &cap, &more, &mcap) != 1 ||
        !(ncol = report_csv_split(line, field, MAX_COLUMNS))) {
        file_fail(w, t->file, ferror(f) ? errno : 0);
        goto out;
    }
    if (!(rows = make_table(w, i, field, ncol)))
        goto out;
    while ((got = read_record(f, &line, &cap, &more, &mcap)) == 1) {
        size_t n = report_csv_split(line, field, MAX_COLUMNS);
        for (size_t c = 0; c < ncol; c++)
            put_text(rows, c, c < n ? field[c] : "");
        if (put_row(w, rows) < 0)
            goto out;
    }
    if (got < 0 || ferror(f)) {
        file_fail(w, t->file, got < 0 ? ENOMEM : errno);
        goto out;
    }
    rc = 0;
out:
    free(line);
    free(more);
    fclose(f);
    return rc;
}

static int have_table(const sql_writer *w, const char *name)
{
    for (size_t i = 0; i < N_SQL_TABLES; i++)
        if (w->made[i] && !strcmp(sql_tables[i].table, name))
            return 1;
    return 0;
}

static void writer_close(sql_writer *w)
{
    for (size_t i = 0; i < N_SQL_TABLES; i++) {
        sqlite3_finalize(w->rows[i].st);
        w->rows[i].st = NULL;
    }
    if (w->db)
        sqlite3_close(w->db);
    w->db = NULL;
}

/* The database at path, a transaction begun. */
static int open_db(sql_writer *w, const char *path)
{
    if (sqlite3_open_v2(path, &w->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW,
                        NULL) != SQLITE_OK)
        return sql_fail(w, "open");
    /* No journal and no syncs: the file is new, and useless unless whole; the folder's swap
     * (after its files are synced) is what makes it visible. */
    return sql_exec(w, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=8192; "
                       "BEGIN");
}

/* The tables not written row by row from the CSV files of the folder dirfd, then every table's
 * indexes, the views, the commit; -1 with w->err on failure. */
static int finish_db(sql_writer *w, int dirfd)
{
    for (size_t i = 0; i < N_SQL_TABLES; i++)
        if (!w->made[i] && import_table(w, dirfd, i) < 0)
            return -1;
    for (size_t i = 0; i < N_SQL_TABLES; i++) {
        const sql_table *t = &sql_tables[i];
        for (size_t k = 0; w->made[i] && k < MAX_INDEXES && t->index[k]; k++) {
            char q[256];
            snprintf(q, sizeof q, "CREATE INDEX %s_%s ON %s (%s)", t->table, t->index[k], t->table,
                     t->index[k]);
            if (sql_exec(w, q) < 0)
                return -1;
        }
    }
    for (size_t i = 0; i < N_SQL_VIEWS; i++) {
        const sql_view *v = &sql_views[i];
        if (have_table(w, v->need[0]) && (!v->need[1] || have_table(w, v->need[1])) &&
            sql_exec(w, v->sql) < 0)
            return -1;
    }
    for (size_t i = 0; i < N_SQL_TABLES; i++) {
        sqlite3_finalize(w->rows[i].st);
        w->rows[i].st = NULL;
    }
    if (sql_exec(w, "COMMIT") < 0)
        return -1;
    if (sqlite3_close(w->db) != SQLITE_OK)
        return sql_fail(w, "close");
    w->db = NULL;
    return 0;
}

/* A failure of the database: the temporary file removed, the error kept for the commit. */
static int fail_report(report *r, sql_writer *w)
{
    writer_close(w);
    if (r->dirfd >= 0)
        unlinkat(r->dirfd, SQLITE_TMP, 0);
    /* The message is kept in place of a file name: report_commit prints both. */
    char *what = NULL;
    if (asprintf(&what, "%s (%s)", REPORT_SQLITE, w->err ? w->err : strerror(EIO)) < 0)
        what = NULL;
    report_note_error(r, what ? what : REPORT_SQLITE, EIO);
    free(what);
    free(w->err);
    w->err = NULL;
    return -1;
}

/* The database's path in the temporary folder, by its real name: SQLite's NOFOLLOW refuses a
 * link anywhere in the path, and the folders above the report may be the user's links (a job
 * folder under ~/runs -> /scratch). The name resolved must still be the folder dirfd holds (else
 * NULL, errno EXDEV), so only a link planted at the file itself is left, which NOFOLLOW refuses. */
static char *db_path(const report *r)
{
    char *real = realpath(r->tmp, NULL);
    struct stat a, b;
    if (real && (stat(real, &a) < 0 || fstat(r->dirfd, &b) < 0 || a.st_dev != b.st_dev ||
                 a.st_ino != b.st_ino)) {
        free(real);
        errno = EXDEV;
        return NULL;
    }
    char *path = real ? report_join(real, SQLITE_TMP) : NULL;
    free(real);
    return path;
}

int report_sqlite_begin(report *r)
{
    if (r->sql)
        return 0;
    sql_writer *w = calloc(1, sizeof *w);
    char *path = w ? db_path(r) : NULL;
    if (!path) {
        int e = w ? errno : ENOMEM;
        free(w);
        report_note_error(r, REPORT_SQLITE, e);
        return -1;
    }
    r->sql = w;
    int rc = open_db(w, path);
    free(path);
    return rc < 0 ? fail_report(r, w) : 0;
}

sql_rows *report_sqlite_rows(report *r, const char *file, const char *header)
{
    sql_writer *w = r->sql;
    if (!w || !w->db)
        return NULL;
    size_t i = 0;
    while (i < N_SQL_TABLES && strcmp(sql_tables[i].file, file))
        i++;
    char *copy = strdup(header), *field[MAX_COLUMNS];
    size_t ncol = copy ? report_csv_split(copy, field, MAX_COLUMNS) : 0;
    sql_rows *rows = NULL;
    if (i == N_SQL_TABLES) {
        if (!w->err && asprintf(&w->err, "%s: no table for it", file) < 0)
            w->err = NULL;
    } else {
        rows = make_table(w, i, field, ncol);
    }
    free(copy);
    if (!rows)
        fail_report(r, w);
    return rows;
}

void report_sqlite_text(sql_rows *rows, int col, const char *v)
{
    put_text(rows, (size_t)col, v);
}

void report_sqlite_int(sql_rows *rows, int col, int64_t v)
{
    if ((size_t)col < rows->ncol)
        sqlite3_bind_int64(rows->st, col + 1, v);
}

void report_sqlite_real(sql_rows *rows, int col, double v)
{
    if ((size_t)col < rows->ncol)
        sqlite3_bind_double(rows->st, col + 1, v);
}

void report_sqlite_row(report *r, sql_rows *rows)
{
    sql_writer *w = r->sql;
    if (w && w->db && put_row(w, rows) < 0)
        fail_report(r, w);
}

void report_sqlite_free(report *r)
{
    sql_writer *w = r->sql;
    if (!w)
        return;
    writer_close(w);
    free(w->err);
    free(w);
    r->sql = NULL;
}

int report_sqlite_write(report *r, int sqlite_only)
{
    if (r->werr || r->dirfd < 0 || !r->tmp)
        return -1;
    if (!r->sql && report_sqlite_begin(r) < 0)
        return -1;
    sql_writer *w = r->sql;
    if (finish_db(w, r->dirfd) < 0)
        return fail_report(r, w);
    if (renameat(r->dirfd, SQLITE_TMP, r->dirfd, REPORT_SQLITE) < 0) {
        if (asprintf(&w->err, "rename: %s", strerror(errno)) < 0)
            w->err = NULL;
        return fail_report(r, w);
    }
    report_file_list(r, REPORT_SQLITE);
    if (!sqlite_only)
        return 0;
    /* --sqlite-only: a CSV file written all the same (none, as the report writes them) leaves
     * the folder. */
    for (size_t i = 0; i < N_SQL_TABLES; i++) {
        if (unlinkat(r->dirfd, sql_tables[i].file, 0) < 0)
            continue;
        for (size_t k = 0; k < r->nfiles; k++)
            if (!strcmp(r->files[k], sql_tables[i].file)) {
                free(r->files[k]);
                memmove(&r->files[k], &r->files[k + 1], (r->nfiles - k - 1) * sizeof *r->files);
                r->nfiles--;
                break;
            }
    }
    return 0;
}
