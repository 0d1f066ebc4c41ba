# Sourced by the batch scripts in this folder: builds the evo command, resumes when the
# run directory holds a complete checkpoint (or an asynchronous run's member checkpoints), forwards SLURM's pre-emption warning signal to
# the job, and requeues it when evo stopped on that signal (exit status 75).
#
# Expects: EVO_HOME (the evo checkout), SCRIPT (pbt_rl_*.py), ARGS (bash array of flags),
# and the launcher command as arguments, e.g. `evo_run mpiexec -n "$SLURM_NTASKS"`.
# Optional: RUN_DIR (default $EVO_HOME/runs/$SLURM_JOB_NAME), EVO_EXTRA_ARGS (more flags),
# EVO_DRY_RUN=1 (print the command and exit).

evo_run() {
    local run_dir="${RUN_DIR:-$EVO_HOME/runs/${SLURM_JOB_NAME:-evo}}"
    local resume=()
    # a complete generation checkpoint, or an asynchronous run's folder of member checkpoints
    # (made when it starts: its members that reached no ready point start afresh on --resume)
    if compgen -G "$run_dir/checkpoints/gen_*/manifest.json" >/dev/null || [ -d "$run_dir/checkpoints/members" ]; then
        resume=(--resume)
    fi
    local extra=()
    read -r -a extra <<<"${EVO_EXTRA_ARGS:-}"
    local cmd=("$@" python "$EVO_HOME/$SCRIPT" "${ARGS[@]}" "${extra[@]}" --run-dir "$run_dir" "${resume[@]}")

    if [ -n "${EVO_DRY_RUN:-}" ]; then
        printf '%q\n' "${cmd[@]}"
        return 0
    fi
    echo "evo: $(date -Is) ${resume[*]:-new run} in $run_dir"
    echo "evo: ${cmd[*]}"

    "${cmd[@]}" &
    local pid=$!
    # SLURM sends USR1 (--signal=B:USR1@SECONDS) to this shell before a pre-emption or the
    # time limit; mpiexec and srun forward USR1 to every rank, which checkpoint and exit 75.
    trap 'echo "evo: $(date -Is) pre-emption signal, asking the job to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' USR1 TERM
    local status
    while true; do
        wait "$pid"
        status=$?
        kill -0 "$pid" 2>/dev/null || break  # wait returned for the trap, not the job
    done
    trap - USR1 TERM

    if [ "$status" -eq 75 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
        echo "evo: $(date -Is) checkpoint written; requeueing job $SLURM_JOB_ID to resume"
        scontrol requeue "$SLURM_JOB_ID"
    fi
    return "$status"
}
