# ruff: noqa
# Near miss: rank 0 hands objective() to the study, which calls it n_trials times; the other ranks call it
# n_trials times themselves (optuna's TorchDistributedTrial broadcasts each suggestion): every rank joins every
# collective. Both sides of the rank test reach the same syncing function, directly or as a callback.
import optuna
import torch
import torch.distributed as dist


def objective(single_trial):
    score = torch.zeros(1)
    dist.broadcast(score, 0)
    return score.item()


def plain(trial):
    return trial.suggest_float("lr", 1e-5, 1e-1)


def study_on_rank_zero(n_trials):
    dist.init_process_group("gloo")
    study = None
    if dist.get_rank() == 0:
        study = optuna.create_study(direction="maximize")
        study.optimize(objective, n_trials=n_trials)
    else:
        for _ in range(n_trials):
            try:
                objective(None)
            except optuna.TrialPruned:
                pass
    return study


def twin_ifs(n_trials):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        optuna.create_study().optimize(objective, n_trials=n_trials)
    if rank != 0:
        for _ in range(n_trials):
            objective(None)


def a_function_that_does_not_sync():
    if dist.get_rank() == 0:
        optuna.create_study().optimize(plain, n_trials=5)


def a_parameter_of_the_same_name(pool, objective):
    if dist.get_rank() == 0:
        pool.submit(objective, None)  # the caller's function, not the file's objective()
