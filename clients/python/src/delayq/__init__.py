"""delayq: jobs that run at a future time.

``Client`` calls a delayq server's HTTP API (v1); ``Worker`` runs a function for each due job;
``AsyncClient`` / ``AsyncWorker`` are the asyncio forms; ``verify_webhook`` checks the signed
requests ``delayq serve --push`` sends.

    from delayq import Client, Worker
    client = Client("http://127.0.0.1:7070")
    client.enqueue("orders", {"order": 42}, delay_ms=30 * 60 * 1000)
"""

from .aio import AsyncClient, AsyncWorker
from .client import API_VERSION, Client, new_id
from .errors import (
    Cancelled, Conflict, ConnectionFailed, DelayqError, Forbidden, InvalidInput, JobDead, JobLeased,
    JobNotDead, LeaseLost, NotFound, PayloadTooLarge, ServerError, StoreFull, TooManyLongPolls,
    Unauthorized, Unavailable,
)
from .models import Batch, ClaimedJob, Enqueued, Job, JobPage, KeyStats, QueueStats
from .webhooks import WebhookMessage, WebhookVerificationError, sign, verify_webhook
from .worker import Dead, Retry, Worker

__version__ = "0.1.0"

__all__ = [
    "API_VERSION", "AsyncClient", "AsyncWorker", "Batch", "Cancelled", "ClaimedJob", "Client", "Conflict",
    "ConnectionFailed", "Dead", "DelayqError", "Enqueued", "Forbidden", "InvalidInput", "Job",
    "JobDead", "JobLeased", "JobNotDead", "JobPage", "KeyStats", "LeaseLost", "NotFound", "PayloadTooLarge",
    "QueueStats", "Retry", "ServerError", "StoreFull", "TooManyLongPolls", "Unauthorized",
    "Unavailable", "WebhookMessage", "WebhookVerificationError", "Worker", "new_id", "sign", "verify_webhook",
    "__version__",
]
