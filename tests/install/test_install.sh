#!/bin/sh
# test_install: termsight as installed, used from outside the build tree. `cmake --install`
# puts the build under a temporary prefix; then, in an empty folder and with nothing of the
# build tree on any path: `termsight --version` and `help`, `termsight demo --headless`, a C
# program built with `pkg-config --cflags --libs termsight` and another with
# `find_package(termsight)` (each run, its recording analysed by the installed command), and
# the Python package installed with pip into a virtual environment and used from there.
#
# Environment: BUILD_DIR (the build tree), SOURCE_DIR (the repository), TERMSIGHT_TEST_TMP.
# Exit status: 0 passed, 1 failed, 77 skipped (no pkg-config, no python3 -m venv).
set -u
NAME=test_install
. "$(dirname "$0")/../lib.sh"

: "${BUILD_DIR:?BUILD_DIR is not set}"
: "${SOURCE_DIR:?SOURCE_DIR is not set}"
scratch install

for tool in pkg-config cc cmake objdump; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "test_install: SKIP: $tool is not installed"
        exit 77
    }
done

prefix=$work/prefix
want="termsight $(sed -n 's/^project(termsight VERSION \([0-9.]*\).*/\1/p' "$SOURCE_DIR/CMakeLists.txt")"
cmake --install "$BUILD_DIR" --prefix "$prefix" >"$work/install.log" 2>&1 ||
    fail "cmake --install failed: $(tail -n 5 "$work/install.log")"
bin=$prefix/bin/termsight
[ -x "$bin" ] || fail "no $bin"
lib=$(ls "$prefix"/lib*/libtermsight.so.0 "$prefix"/lib*/*/libtermsight.so.0 2>/dev/null | head -n 1)
[ -n "$lib" ] || fail "no libtermsight.so.0 under $prefix/lib"
libdir=$(dirname "$lib")
# A sanitizer build's library needs its runtime loaded first: programs built here without it
# could not use it. The normal build runs this test.
if objdump -p "$lib" 2>/dev/null | grep -Eq 'NEEDED +lib(asan|tsan)'; then
    echo "test_install: SKIP: a sanitizer build (the normal build runs this test)"
    exit 77
fi
soname=$(objdump -p "$lib" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = libtermsight.so.0 ] || fail "the library's SONAME is '$soname'"
for f in "$prefix/include/termsight/termsight.h" "$libdir/pkgconfig/termsight.pc" \
    "$libdir/cmake/termsight/termsightConfig.cmake" \
    "$libdir/cmake/termsight/termsightConfigVersion.cmake" \
    "$prefix/libexec/termsight/demo_train" "$prefix/share/man/man1/termsight.1" \
    "$prefix/share/bash-completion/completions/termsight" \
    "$prefix/lib/systemd/user/termsight-export.service"; do
    [ -e "$f" ] || fail "not installed: $f"
done
grep -q "^\.TH TERMSIGHT 1 .*${want#termsight }" "$prefix/share/man/man1/termsight.1" ||
    fail "the man page does not carry the version"
grep -qx "ExecStart=$prefix/bin/termsight export --prometheus --listen 127.0.0.1:9464" \
    "$prefix/lib/systemd/user/termsight-export.service" ||
    fail "the systemd unit does not run the installed termsight export"
ok "installed under a prefix: bin/termsight, ${libdir#"$prefix/"}/libtermsight.so.0, the header, termsight.pc, the CMake package, libexec/termsight, termsight(1), the bash completion, the exporter's systemd unit"

# From here on: an empty folder, and the build tree on no path.
mkdir "$work/empty" && cd "$work/empty" || exit 1
unset TERMSIGHT_BIN TERMSIGHT_LIB TERMSIGHT_DEMO TERMSIGHT_PYTHON_BOOT PYTHONPATH LD_LIBRARY_PATH
[ "$("$bin" --version)" = "$want" ] || fail "--version says '$("$bin" --version)', not '$want'"
"$bin" help analyse | grep -q "usage: termsight analyse" || fail "help analyse"
ok "termsight --version ($want) and help COMMAND"

"$bin" demo --headless --seconds 2 -o "$work/demo" >"$work/demo.log" 2>&1 ||
    fail "demo --headless failed: $(tail -n 5 "$work/demo.log")"
ls "$work"/demo/*/report/summary.json >/dev/null 2>&1 || fail "demo left no report"
ok "termsight demo --headless --seconds 2 runs the installed trainer"

"$bin" run -o "$work/runout" -- /bin/true >"$work/run.log" 2>&1 ||
    fail "run found no library: $(cat "$work/run.log")"
ok "termsight run finds the installed library"

# Analyses what hello recorded: 10 steps, MatMul.
analysed() {
    run=$(tail -n 1 "$1")
    [ -d "$run" ] || fail "$2: no run folder ($run)"
    "$bin" analyse "$run" >"$work/analyse.log" 2>&1 || fail "$2: analyse: $(cat "$work/analyse.log")"
    grep -q "steps:.*10 " "$work/analyse.log" || fail "$2: not 10 steps: $(cat "$work/analyse.log")"
    grep -q "MatMul" "$work/analyse.log" || fail "$2: no MatMul in the report"
}

export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046 # pkg-config's words are meant to split
cc -o hello_pc "$SOURCE_DIR/tests/install/hello.c" $(pkg-config --cflags --libs termsight) \
    2>"$work/cc.log" || fail "cc with pkg-config: $(cat "$work/cc.log")"
LD_LIBRARY_PATH=$libdir ./hello_pc "$work/pc" >"$work/hello_pc.out" 2>&1 ||
    fail "hello (pkg-config) failed: $(cat "$work/hello_pc.out")"
analysed "$work/hello_pc.out" "pkg-config"
ok "a C program built with pkg-config --cflags --libs termsight records 10 steps"

mkdir cm && cat >cm/CMakeLists.txt <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(hello C)
find_package(termsight 0 REQUIRED)
add_executable(hello "$SOURCE_DIR/tests/install/hello.c")
target_link_libraries(hello PRIVATE termsight::termsight)
CMAKE
cmake -S cm -B cm/build -DCMAKE_PREFIX_PATH="$prefix" >"$work/cm.log" 2>&1 &&
    cmake --build cm/build >>"$work/cm.log" 2>&1 || fail "find_package build: $(tail -n 20 "$work/cm.log")"
./cm/build/hello "$work/cm" >"$work/hello_cm.out" 2>&1 ||
    fail "hello (find_package) failed: $(cat "$work/hello_cm.out")"
analysed "$work/hello_cm.out" "find_package"
ok "a C program built with find_package(termsight) records 10 steps"

# The Debian package: made by cpack from the build, its Depends computed (the libraries the
# binaries link, never PyTorch for the profiler itself), its tree working where it is unpacked.
if command -v cpack >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 &&
    command -v dpkg-shlibdeps >/dev/null 2>&1; then
    (cd "$BUILD_DIR" && cpack -G DEB -B "$work/deb") >"$work/cpack.log" 2>&1 ||
        fail "cpack -G DEB: $(tail -n 10 "$work/cpack.log")"
    deb=$(ls "$work"/deb/termsight_*_*.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || fail "no termsight_<version>_<arch>.deb: $(ls "$work/deb")"
    case "$(basename "$deb")" in "termsight_${want#termsight }_"*.deb) ;;
    *) fail "the package is named $(basename "$deb")" ;; esac
    depends=$(dpkg-deb -f "$deb" Depends)
    for d in libc6 libncursesw6 libcjson1 libisal2 libsqlite3-0 libmicrohttpd12; do
        echo "$depends" | grep -q "$d" || fail "Depends lacks $d: $depends"
    done
    echo "$depends" | grep -q torch && fail "the profiler's package depends on PyTorch: $depends"
    dpkg-deb -x "$deb" "$work/debroot" || fail "dpkg-deb -x"
    "$work/debroot/usr/bin/termsight" --version | grep -qF "$want" || fail "the package's termsight"
    [ -f "$work/debroot/usr/lib/systemd/user/termsight-export.service" ] ||
        fail "the package lacks usr/lib/systemd/user/termsight-export.service"
    "$work/debroot/usr/bin/termsight" demo --headless --seconds 2 -o "$work/debdemo" \
        >"$work/debdemo.log" 2>&1 || fail "the package's demo: $(tail -n 5 "$work/debdemo.log")"
    ok "cpack -G DEB makes $(basename "$deb") (Depends: $depends); its tree runs the demo"
else
    echo "test_install: (no cpack, dpkg-deb or dpkg-shlibdeps: the Debian package is not tested)"
fi

# Python: the package installed with pip into a venv (Debian's pip refuses system installs),
# finding the installed library and command through the loader's path and PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if ! "$py" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1; then
    echo "test_install: SKIP (Python): no python3 -m venv: $(tail -n 2 "$work/venv.log")"
    exit 0
fi
cp -r "$SOURCE_DIR/python" "$work/python" && rm -rf "$work/python/build" "$work/python"/*.egg-info
"$work/venv/bin/pip" install --no-deps --no-build-isolation --no-index "$work/python" \
    >"$work/pip.log" 2>&1 || fail "pip install: $(tail -n 10 "$work/pip.log")"
PATH=$prefix/bin:$PATH LD_LIBRARY_PATH=$libdir "$work/venv/bin/python" - "$work/py" \
    >"$work/py.log" 2>&1 <<'PY' || fail "Python: $(cat "$work/py.log")"
import os, sys, termsight
assert os.path.dirname(termsight.__file__).startswith(sys.prefix), termsight.__file__
p = termsight.Profiler(output_path=sys.argv[1])
for _ in range(10):
    with termsight.step():
        with termsight.range("Default/net/MatMul-op1", "MatMul"):
            pass
p.stop()
report = p.analyse()
assert os.path.exists(os.path.join(report, "summary.json")), report
print("loaded", termsight._lib.loaded_path())
p.close()
PY
grep -q "^loaded $libdir/libtermsight.so.0" "$work/py.log" ||
    fail "Python loaded another library: $(cat "$work/py.log")"
ok "the Python package, pip-installed in a venv, uses the installed library and command"
exit 0
