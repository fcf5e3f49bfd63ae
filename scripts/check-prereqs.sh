#!/usr/bin/env bash
# Checks what hakiri needs from the machine before anything is installed into
# the venv: Python >= 3.11 and Java >= 17; with --test also the PostgreSQL server
# binaries (for the test suite's throwaway server). Jars (the PostgreSQL JDBC
# driver; for the tests, s3proxy) are not a prerequisite: they are downloaded from
# Maven Central once.
# Prints one line per missing piece, then the apt line that installs them all.
set -uo pipefail

PYTHON="${PYTHON:-python3}"
for_tests=0
[[ "${1:-}" == "--test" ]] && for_tests=1
if (( for_tests )); then
    APT_LINE="sudo apt-get install -y openjdk-17-jre-headless postgresql python3-venv"
else
    APT_LINE="sudo apt-get install -y openjdk-17-jre-headless python3-venv"
fi
missing=0

missing() {
    echo "missing: $*" >&2
    missing=1
}

# Python
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    missing "$PYTHON (Python >= 3.11) not found"
elif ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    missing "Python >= 3.11 (found $("$PYTHON" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '?') at $(command -v "$PYTHON"))"
elif ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    missing "the venv module for $PYTHON (Debian package python3-venv)"
fi

# Java: `java -version` prints e.g. `openjdk version "17.0.15" ...` or `"1.8.0_392"` on stderr.
if ! command -v java >/dev/null 2>&1; then
    missing "java (Java >= 17) not found"
else
    java_version="$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)"
    java_major="${java_version%%.*}"
    if [[ "$java_major" == "1" ]]; then
        java_major="$(echo "$java_version" | cut -d. -f2)"
    fi
    if ! [[ "$java_major" =~ ^[0-9]+$ ]] || (( java_major < 17 )); then
        missing "Java >= 17 (found '${java_version:-unknown}' at $(command -v java))"
    fi
fi

# PostgreSQL server binaries, for the tests; not needed when they are pointed at a server.
if (( for_tests )) && [[ -z "${HAKIRI_TEST_PG_URL:-}" ]]; then
    if ! command -v initdb >/dev/null 2>&1 && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        missing "PostgreSQL server binaries (initdb not in PATH or /usr/lib/postgresql/*/bin; or set HAKIRI_TEST_PG_URL)"
    fi
fi

# Jars given by path must exist (the JDBC driver is downloaded otherwise).
if [[ -n "${HAKIRI_SPARK_JARS:-}" ]]; then
    IFS=',' read -r -a jars <<<"$HAKIRI_SPARK_JARS"
    for jar in "${jars[@]}"; do
        jar="${jar#"${jar%%[![:space:]]*}"}"
        jar="${jar%"${jar##*[![:space:]]}"}"
        if [[ -n "$jar" && ! -f "$jar" ]]; then
            missing "JDBC jar $jar (listed in HAKIRI_SPARK_JARS) does not exist"
        fi
    done
fi

if (( missing )); then
    echo "install with: $APT_LINE" >&2
    exit 1
fi
what="$("$PYTHON" -c 'import platform; print("Python", platform.python_version())'), Java $java_major"
(( for_tests )) && what="$what, PostgreSQL"
echo "prerequisites ok: $what"
