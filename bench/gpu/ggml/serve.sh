# llama-server's life in the harness scripts (sourced after setting $port): wait_ready polls its /health,
# server_pid finds it (one server runs at a time), stop_server ends it with SIGINT and waits.
wait_ready() {
  for _ in $(seq 600); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null && return
    sleep 0.2
  done
  echo "llama-server did not become ready"; exit 1
}
server_pid() { pgrep -x llama-server | head -1; }
stop_server() { kill -INT "$1"; while kill -0 "$1" 2>/dev/null; do sleep 0.1; done; }
