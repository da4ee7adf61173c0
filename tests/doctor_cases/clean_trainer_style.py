# ruff: noqa
# A correct DDP script in another style than the series' (a Trainer class, logging, an iteration loop,
# gradient accumulation with no_sync, resume at the next step): the doctor must say nothing.
import contextlib
import logging
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger("train")


class Trainer:
    def __init__(self, args):
        self.args = args
        self.ddp = int(os.environ.get("RANK", -1)) != -1
        if self.ddp:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend=backend)
            self.local_rank = int(os.environ["LOCAL_RANK"])
            self.master_process = dist.get_rank() == 0
        else:
            self.local_rank, self.master_process = 0, True
        self.device = torch.device("cuda", self.local_rank) if torch.cuda.is_available() else torch.device("cpu")
        data = TensorDataset(torch.randn(256, 8), torch.randint(3, (256,)))
        self.sampler = DistributedSampler(data, shuffle=True, seed=args.seed)
        self.loader = DataLoader(data, batch_size=16, sampler=self.sampler)
        self.model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.start_epoch = 0
        if os.path.exists(args.checkpoint):
            state = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
            self.model.load_state_dict(state["model"])
            self.start_epoch = state["epoch"] + 1
        self.raw_model = self.model
        self.model = DistributedDataParallel(self.model, device_ids=[self.local_rank] if torch.cuda.is_available()
                                             else None)
        self.loss_fn = nn.CrossEntropyLoss()

    def save(self, epoch):
        if not self.master_process:
            return
        tmp = self.args.checkpoint + ".tmp"
        torch.save({"model": self.raw_model.state_dict(), "epoch": epoch}, tmp)
        os.replace(tmp, self.args.checkpoint)

    def train(self):
        for epoch in range(self.start_epoch, self.args.epochs):
            self.sampler.set_epoch(epoch)
            totals = torch.zeros(2, device=self.device)
            for step, (x, y) in enumerate(self.loader):
                x, y = x.to(self.device), y.to(self.device)
                sync = (step + 1) % self.args.accumulate == 0
                with contextlib.nullcontext() if sync else self.model.no_sync():
                    loss = self.loss_fn(self.model(x), y) / self.args.accumulate
                    loss.backward()
                if sync:
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=True)
                totals += torch.stack([loss.detach() * len(y), torch.tensor(float(len(y)), device=self.device)])
            dist.all_reduce(totals)
            if self.master_process:
                logger.info("epoch %d loss %.4f", epoch, (totals[0] / totals[1]).item())
            self.save(epoch)
            dist.barrier()
        dist.destroy_process_group()
