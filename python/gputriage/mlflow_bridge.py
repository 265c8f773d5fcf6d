"""The job's own MLflow run, told to the recorder.

Under ``gputriage record --mlflow`` the recorder hands the job nothing that would
change what MLflow does for it (no ``MLFLOW_RUN_ID``: a job that calls
``mlflow.set_experiment(...)`` then ``mlflow.start_run()`` would be refused a run in
its own experiment). When the job opens a run (``mlflow.start_run``, hooked in
zero-code mode and whenever ``gputriage`` is imported under a recorder), this tells
the recorder its id, its experiment and where MLflow keeps it
(``mlflow.job_run_id``, ``mlflow.job_experiment_id``, ``mlflow.job_tracking_uri``
on the configuration channel). The recorder's figures and verdicts then go into
that run, where it reaches the same server, and it opens no run of its own; a run
opened after the recorder's first window was due gets them at the end, beside
the recorder's own run (linked by its param ``gputriage.mlflow.job_run_id``).
"""
import functools

from gputriage import job_config as _config

_told = False


def _tell(run):
    global _told
    if _told or run is None:
        return
    info = getattr(run, "info", None)
    run_id = getattr(info, "run_id", None)
    if not run_id:
        return
    _told = True
    import mlflow
    _config._send("mlflow.job_run_id", run_id)
    experiment = getattr(info, "experiment_id", None)
    if experiment is not None:
        _config._send("mlflow.job_experiment_id", experiment)
    try:
        _config._send("mlflow.job_tracking_uri", mlflow.get_tracking_uri())
    except Exception:
        pass


def patch_mlflow(mlflow):
    """Wraps mlflow.start_run so that the first run the job opens is told."""
    start = getattr(mlflow, "start_run", None)
    if start is None or getattr(start, "_gputriage", False):
        return

    @functools.wraps(start)
    def start_run(*args, **kwargs):
        run = start(*args, **kwargs)
        try:
            _tell(run)
        except Exception:  # the job's run is the job's: our bookkeeping never breaks it
            pass
        return run

    start_run._gputriage = True
    mlflow.start_run = start_run
