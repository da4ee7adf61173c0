# ruff: noqa
# A syncing function passed to a call (a callback) runs where that call runs: under `if rank == 0:` the other
# ranks never join its collectives, unless they reach the same function too. Calling another syncing function
# on the other side does not balance it.
import threading

import optuna
import torch
import torch.distributed as dist


def objective(trial):
    score = torch.zeros(1)
    dist.broadcast(score, 0)
    return score.item()


def evaluate(trial):
    score = torch.ones(1)
    dist.all_reduce(score)
    return score.item()


def only_rank_zero(n_trials):
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        study = optuna.create_study(direction="maximize")
        study.optimize(objective, n_trials=n_trials)  # expect: DDP011
    else:
        print("waiting for the study")


def another_function_on_the_other_side(n_trials):
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        optuna.create_study().optimize(objective, n_trials=n_trials)
    else:
        for _ in range(n_trials):
            evaluate(None)  # expect: DDP011


def in_a_thread():
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        threading.Thread(target=evaluate, args=(None,)).start()  # expect: DDP011
