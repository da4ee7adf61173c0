# ruff: noqa
# Near miss: the ranks that leave early call barrier() once on their way out; rank 0 calls it once at the end,
# after reading what every rank wrote. Each rank calls barrier() once: balanced, nested or flat.
import torch
import torch.distributed as dist


def merge(parts, only_rank0):
    torch.save(parts, f"part{dist.get_rank()}.pt")
    dist.barrier()
    if only_rank0:
        if dist.get_rank() != 0:
            dist.barrier()
            return None
    merged = [torch.load(f"part{r}.pt") for r in range(dist.get_world_size())]
    dist.barrier()
    return merged


def collect(parts):
    if dist.get_rank() > 0:
        dist.barrier()
        return None
    merged = list(parts)
    with torch.no_grad():
        dist.barrier()
    return merged


def main():
    dist.init_process_group("gloo")
    merge([torch.ones(2)], True)
    collect([torch.ones(2)])


if __name__ == "__main__":
    main()
