/* analyse_dask: a job's rank analyses as tasks on a Dask cluster (termsight analyse JOB
 * --scheduler ADDR). Each task is a command line, `termsight analyse --lean ... RUN_FOLDER`, run
 * on a worker by the standard library's subprocess.run: the client pickles only that function
 * and its arguments, so a worker needs Python with distributed and the termsight command, never
 * this project's Python package. The client is a short Python program given to `python3 -c`
 * (TERMSIGHT_PYTHON names another interpreter); it prints one line per rank that failed and
 * never waits without bound: a scheduler that does not answer in CONNECT_S seconds, a task past
 * its time-out, a cluster that finishes nothing for the time-out plus a minute each end with a
 * line per rank. */
#include "analyse_dask.h"
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CONNECT_S 10 /* seconds to reach the scheduler */

/* argv: scheduler, task time-out (s), connect time-out (s), the command, its options as one
 * NUL-free string separated by \x1f, the Python as named (TERMSIGHT_PYTHON or python3), then the
 * rank folders. Exit 0 when the tasks were submitted (however they went), 3 when the cluster
 * could not be used at all. */
static const char driver[] =
    "import subprocess, sys, time\n"
    "addr, limit, connect, cmd, opts = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), "
    "sys.argv[4], [o for o in sys.argv[5].split('\\x1f') if o]\n"
    "python, folders = sys.argv[6], sys.argv[7:]\n"
    "def say(folder, why):\n"
    "    why = ' '.join(str(why).split())\n"
    "    print('termsight: analyse: %s: %s' % (folder, why), file=sys.stderr, flush=True)\n"
    "try:\n"
    "    from distributed import Client, wait\n"
    "except Exception as e:\n"
    "    print('termsight: analyse: --scheduler needs Python with Dask distributed here: %s "
    "(%s) has none (%s); set TERMSIGHT_PYTHON to a Python that has it' % (python, "
    "sys.executable, e), file=sys.stderr)\n"
    "    sys.exit(3)\n"
    "try:\n"
    "    client = Client(addr, timeout=connect)\n"
    "except Exception as e:\n"
    "    for f in folders:\n"
    "        say(f, 'not analysed: the Dask scheduler %s does not answer (%s)' % (addr, "
    "type(e).__name__))\n"
    "    sys.exit(3)\n"
    "futs = {}\n"
    "for f in folders:\n"
    "    futs[client.submit(subprocess.run, [cmd, 'analyse'] + opts + [f], "
    "stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=limit, pure=False)] = f\n"
    "pending = set(futs)\n"
    "while pending:\n"
    "    done, pending = wait(pending, timeout=limit + 60, return_when='FIRST_COMPLETED')\n"
    "    if not done:\n"
    "        for fu in pending:\n"
    "            say(futs[fu], 'no answer from the cluster in %.0f s (no worker, or one that "
    "hangs): not analysed' % (limit + 60))\n"
    "            fu.cancel()\n"
    "        break\n"
    "    for fu in done:\n"
    "        f = futs[fu]\n"
    "        try:\n"
    "            p = fu.result()\n"
    "        except FileNotFoundError as e:\n"
    "            say(f, 'a worker cannot run %s: %s (install termsight on every worker, on its "
    "PATH)' % (cmd, e.strerror))\n"
    "        except subprocess.TimeoutExpired:\n"
    "            say(f, 'its analysis passed the time-out of %.0f s on a worker' % limit)\n"
    "        except Exception as e:\n"
    "            say(f, 'its task failed on a worker: %s: %s' % (type(e).__name__, e))\n"
    "        else:\n"
    "            if p.returncode != 0:\n"
    "                err = p.stderr.decode('utf-8', 'replace').strip().splitlines()\n"
    "                say(f, 'on a worker: ' + (err[-1] if err else 'exit %d' % p.returncode))\n"
    "client.close(timeout=connect)\n";

int analyse_dask_ranks(const char *scheduler, double timeout_s, char **folders, int n,
                       char *const *options)
{
    const char *python = getenv("TERMSIGHT_PYTHON");
    if (!python || !*python)
        python = "python3";
    const char *cmd = getenv("TERMSIGHT_WORKER_COMMAND");
    if (!cmd || !*cmd)
        cmd = "termsight";
    size_t olen = 1;
    for (char *const *o = options; *o; o++)
        olen += strlen(*o) + 1;
    char *opts = calloc(1, olen), limit[32], connect[32];
    char **argv = calloc((size_t)n + 10, sizeof *argv);
    if (!opts || !argv) {
        free(opts);
        free(argv);
        cli_error("analyse: out of memory");
        return -1;
    }
    for (char *const *o = options; *o; o++) {
        strcat(opts, *o);
        strcat(opts, "\x1f");
    }
    snprintf(limit, sizeof limit, "%g", timeout_s);
    snprintf(connect, sizeof connect, "%d", CONNECT_S);
    int k = 0;
    argv[k++] = (char *)python;
    argv[k++] = "-c";
    argv[k++] = (char *)driver;
    argv[k++] = (char *)scheduler;
    argv[k++] = limit;
    argv[k++] = connect;
    argv[k++] = (char *)cmd;
    argv[k++] = opts;
    argv[k++] = (char *)python;
    for (int i = 0; i < n; i++)
        argv[k++] = folders[i];
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execvp(python, argv);
        fprintf(stderr,
                "termsight: analyse: --scheduler: cannot run %s: %s (TERMSIGHT_PYTHON names "
                "the Python with Dask distributed to use)\n",
                python, strerror(errno));
        _exit(127);
    }
    free(opts);
    free(argv);
    if (pid < 0) {
        cli_error("analyse: fork: %s", strerror(errno));
        return -1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    return -1;
}
