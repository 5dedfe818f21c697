"""The client's side of the traffic: tasks submitted once per partition, their results gathered,
and the bytes that cross the network counted."""
from __future__ import annotations

import pickle
from typing import Any, Callable, Sequence

__all__ = ["Backend"]


def _size(obj: Any) -> int:
    return len(pickle.dumps(obj, protocol=5))


class Backend:
    """A Dask client with a tally of what the fit sends and receives.

    ``sent`` counts the pickled arguments of every task besides the futures it reads (the model
    parameters, a coefficient vector), once per partition; ``received`` the pickled results the
    client gathers (R's parts, gradients). The futures themselves stay on the workers.

    Parameters
    ----------
    client : distributed.Client
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sent = self.received = self.tasks = 0

    def map(self, function: Callable, futures: Sequence[Any], *args: Any) -> list[Any]:
        """``function(future, *args)`` for every future, each where its future lives."""
        size = _size(args) if args else 0
        self.sent += size * len(futures)
        self.tasks += len(futures)
        return [self.client.submit(function, future, *args, pure=False) for future in futures]

    def submit(self, function: Callable, *args: Any) -> Any:
        """One task on any worker (``args`` are counted as sent)."""
        self.sent += _size(args)
        self.tasks += 1
        return self.client.submit(function, *args, pure=False)

    def gather(self, futures: Sequence[Any]) -> list[Any]:
        """The results of ``futures``, in their order."""
        results = self.client.gather(list(futures))
        self.received += sum(_size(result) for result in results)
        return results

    def counters(self) -> tuple[int, int, int]:
        """``(sent, received, tasks)`` so far."""
        return self.sent, self.received, self.tasks
