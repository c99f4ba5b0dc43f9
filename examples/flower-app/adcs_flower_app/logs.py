"""adcs's log records in Flower's log: the ServerApp's rounds and the ClientApp's requests."""

from __future__ import annotations

import logging


def show_adcs_logs() -> None:
    """Send adcs's INFO records through Flower's handlers (console and the run's log stream).

    Flower shows what its own ``flwr`` logger writes; adcs logs under ``adcs`` (one line per
    round on the server, one per request on a client), which nothing would show otherwise.
    """
    adcs_logger = logging.getLogger("adcs")
    adcs_logger.setLevel(logging.INFO)
    for handler in logging.getLogger("flwr").handlers:
        if handler not in adcs_logger.handlers:
            adcs_logger.addHandler(handler)
