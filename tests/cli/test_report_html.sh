#!/bin/sh
# test_report_html: report.html in a real browser. mlp_train records a run, `termsight analyse`
# writes its report, and Debian's chromium, headless and offline, loads report.html: the page
# renders (its DOM has the step bars, the operator table, the queue heatmap and the CPU gauges;
# a screenshot is taken) and the browser's console logs no error. The same check on a copy of
# the page with a broken script must see the error, so the check itself is known to work.
#
# Environment: TERMSIGHT_BIN, MLP_TRAIN, TERMSIGHT_TEST_TMP (scratch folder).
# Exit status: 0 passed, 1 failed, 77 skipped (no chromium).
set -u
NAME=test_report_html
. "$(dirname "$0")/../lib.sh"

browser=""
for b in chromium chromium-browser; do
    command -v "$b" >/dev/null 2>&1 && browser=$b && break
done
if [ -z "$browser" ]; then
    echo "test_report_html: SKIP: chromium is not installed (apt-get install chromium)"
    exit 77
fi
: "${TERMSIGHT_BIN:?TERMSIGHT_BIN is not set}"
: "${MLP_TRAIN:?MLP_TRAIN is not set}"
scratch report-html


# The browser headless, with a profile of its own in the scratch folder, no network (a page
# that tried to load anything would fail to), at most 60 s. Prints the DOM; its log to $2.
browse() {
    timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$work/profile" --proxy-server=127.0.0.1:9 \
        --enable-logging=stderr --v=0 --virtual-time-budget=3000 \
        --dump-dom "file://$1" 2>"$2"
}

# Console errors in a log: the page's uncaught exceptions and console.error lines.
console_errors() {
    grep -E 'CONSOLE.*(Uncaught|Error|error)' "$1"
}

# About a second of training: enough for CPU samples (every 100 ms) and a long step trace.
"$MLP_TRAIN" --steps 2000 --batch 64 --hidden 64 --output "$work/out" >"$work/train.log" 2>&1 ||
    fail "mlp_train failed: $(cat "$work/train.log")"
run=$(ls -d "$work"/out/*/ 2>/dev/null | head -n 1)
[ -n "$run" ] || fail "no run folder under $work/out"
"$TERMSIGHT_BIN" analyse "$run" >"$work/analyse.log" 2>&1 ||
    fail "analyse failed: $(cat "$work/analyse.log")"
page="${run}report/report.html"
[ -f "$page" ] || fail "no $page"
ok "analyse wrote report.html"

browse "$page" "$work/browser.log" >"$work/dom.html" || fail "the browser failed: $(tail -n 5 "$work/browser.log")"
for part in 'id="steps"' 'id="ops"' 'id="queues"' 'id="cpu"' 'Step trace' 'MatMul' \
    'batch_queue' '>machine<' 'href="timeline.json"'; do
    grep -qF "$part" "$work/dom.html" || fail "the rendered page lacks $part"
done
rects=$(grep -o '<rect' "$work/dom.html" | wc -l)
[ "$rects" -ge 900 ] || fail "the rendered page has $rects bars and cells (2000 steps: 300 bars or more, three parts each)"
if console_errors "$work/browser.log"; then
    fail "the browser's console logged errors"
fi
ok "chromium renders it ($rects bars and cells), its console logs no error"

timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/profile" --proxy-server=127.0.0.1:9 --hide-scrollbars \
    --window-size=1280,2000 --screenshot="$work/shot.png" "file://$page" >/dev/null 2>&1
size=$(stat -c %s "$work/shot.png" 2>/dev/null || echo 0)
[ "$size" -gt 20000 ] || fail "the screenshot is $size bytes: nothing drawn"
ok "a screenshot of it is $size bytes"

# The check itself: a script error in a copy of the page is seen.
sed 's|</body>|<script>no_such_function();</script></body>|' "$page" >"$work/broken.html"
browse "$work/broken.html" "$work/broken.log" >/dev/null
console_errors "$work/broken.log" >/dev/null ||
    fail "a page with a script error went unnoticed: the console check does not work"
ok "a broken copy's script error is seen"
exit 0
