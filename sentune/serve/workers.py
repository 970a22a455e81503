"""`sentune serve --workers N`: uvicorn's worker processes, each given the command's settings in its own config.

uvicorn starts N > 1 workers from an import string and calls a factory without arguments; the usual way to hand such
a factory its settings is an environment variable, which would write this process's environment. Instead the settings
travel inside uvicorn's Config, which uvicorn pickles into each worker process, and the worker builds the app from
them (`load_app`)."""

from __future__ import annotations

from functools import partial

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from sentune.serve.admission import TimedConfig
from sentune.serve.settings import ServeSettings


class WorkerConfig(TimedConfig):
    """uvicorn's Config with sentune's settings (as JSON, so it pickles as plain text); its app is `create_app`
    called with them, in each worker."""

    def __init__(self, settings: ServeSettings, **kwargs) -> None:
        # the import string only satisfies uvicorn's rule that several workers load their app by name; load_app decides
        super().__init__("sentune.serve.app:create_app", settings, factory=True, **kwargs)
        self.serve_settings = settings.to_json()

    def load_app(self):
        from sentune.serve.app import create_app

        return partial(create_app, ServeSettings.from_json(self.serve_settings))


def run_workers(settings: ServeSettings, **uvicorn_options) -> bool:
    """Serve with settings.workers processes on one socket, as uvicorn.run does for an import string. False when a
    worker failed to start (its model or index would not load): uvicorn then stops every worker rather than start it
    again, and the command must not end as if it had served."""
    config = WorkerConfig(settings, workers=settings.workers, **uvicorn_options)
    socket = config.bind_socket()
    supervisor = Multiprocess(config, sockets=[socket])
    try:
        supervisor.run()
    except KeyboardInterrupt:
        pass
    return not any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes)
