# Sourced by the store load tests: kill_recorders STORE RESULTS_DIR KILLS MAX_SLEEP_TENTHS
# SIGKILLs a running `record --store STORE` at a random moment (up to
# MAX_SLEEP_TENTHS tenths of a second apart) until KILLS recorders have died of
# it, as counted from the "NAME RC" lines their workers append to
# RESULTS_DIR/rc.* (a recorder may exit between the choice and the signal: only
# the deaths its worker saw count), or until the caller's background workers end.
kill_recorders() {
  local store=$1 results=$2 kills=$3 max_sleep=$4 victims="" victim pids
  while [ "$(cat "$results"/rc.* 2>/dev/null | grep -c ' 137$')" -lt "$kills" ]; do
    sleep "0.$((RANDOM % max_sleep + 1))"
    # Recorders only: not the short-lived forks a recorder makes (popen, the job before exec).
    mapfile -t pids < <(pgrep -f -- "record --store $store" | while read -r p; do
      parent=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || continue
      tr "\0" " " <"/proc/$parent/cmdline" 2>/dev/null | grep -q -- "record --store" || echo "$p"
    done)
    if [ "${#pids[@]}" -eq 0 ]; then
      [ -n "$(jobs -rp)" ] || break  # the workers (this shell's background jobs) are done
      continue
    fi
    victim=${pids[$((RANDOM % ${#pids[@]}))]}
    case " $victims " in *" $victim "*) continue ;; esac  # still exiting from an earlier kill
    kill -9 "$victim" 2>/dev/null && victims="$victims $victim"
  done
}
