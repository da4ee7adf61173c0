"""The model and its loss: a softmax fed to CrossEntropyLoss.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast

from ..program import dotted, last_name, walk

RULES = {
    "DDP019": ("softmax-into-cross-entropy", "{detail} fed into CrossEntropyLoss, which applies log_softmax itself",
               "CrossEntropyLoss takes raw logits. After a Softmax the loss can never go below "
               "log(1 + (C-1)/e) (1.46 for 10 classes) and the gradients shrink: training slows or freezes. "
               "A log_softmax before it is redundant (harmless, but NLLLoss was meant).",
               "Return the logits from forward(); apply softmax only to report probabilities. Checked: a "
               "model whose forward() returns a softmax / log_softmax, or such a call passed straight to the "
               "loss, in a file that uses CrossEntropyLoss.",
               "01 · The single-device baseline"),
}


SOFTMAXES = {"softmax", "log_softmax", "Softmax", "LogSoftmax"}


def returned_softmax(m, fn):
    """The softmax call that forward() returns, or None: `return self.softmax(x)`, `return F.softmax(x)`,
    `out = self.softmax(x); return out`, where self.softmax = nn.Softmax(...) in __init__."""
    cls = m.parent.get(fn)
    softmax_attrs = set()
    if isinstance(cls, ast.ClassDef):
        for node in walk(cls):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value) in SOFTMAXES:
                softmax_attrs |= {dotted(t) for t in node.targets}
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value) == "Sequential" and node.value.args and \
                    last_name(node.value.args[-1]) in SOFTMAXES:
                softmax_attrs |= {"seq:" + dotted(t) for t in node.targets}
    assigned = {}
    for node in m.statements(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value

    def softmax_of(expr, depth=0):
        if isinstance(expr, ast.Name) and expr.id in assigned and depth < 3:
            return softmax_of(assigned[expr.id], depth + 1)
        if isinstance(expr, ast.Call):
            if last_name(expr) in SOFTMAXES or dotted(expr.func) in softmax_attrs or \
                    ("seq:" + dotted(expr.func)) in softmax_attrs:
                return expr
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in SOFTMAXES:  # x.softmax(1)
                return expr
        return None

    returns = [n for n in m.statements(fn) if isinstance(n, ast.Return) and n.value is not None]
    found = [softmax_of(r.value) for r in returns]
    return found[0] if found and all(found) else None


def softmax_kind(call):
    return "log_softmax" if "log" in last_name(call).lower() else "Softmax"


def rule_softmax_into_cross_entropy(m):
    """DDP019: a model whose forward() returns a softmax, an nn.Sequential that ends with one, or
    cross_entropy(softmax(x), y), in a file with CrossEntropyLoss.

    Error: a wrong result: the loss cannot go below a floor and training slows or stalls.
    """
    if not ({"CrossEntropyLoss", "cross_entropy"} & m.call_names):
        return
    nll = "NLLLoss" in m.call_names or "nll_loss" in m.call_names
    for defs in m.functions.values():
        for fn in defs:
            if fn.name == "forward" and isinstance(m.parent.get(fn), ast.ClassDef):
                call = returned_softmax(m, fn)
                if call is not None:
                    kind = softmax_kind(call)
                    if not (kind == "log_softmax" and nll):
                        yield call, "DDP019", f"a {kind} at the end of forward() is"
    for seq in m.named_calls("Sequential"):  # nn.Sequential(..., nn.Softmax(dim=1)): the model ends in a softmax
        last = seq.args[-1] if seq.args else None
        if isinstance(last, ast.Call) and last_name(last) in ("Softmax", "LogSoftmax"):
            kind = softmax_kind(last)
            if not (kind == "log_softmax" and nll):
                yield last, "DDP019", f"a {kind} at the end of an nn.Sequential is"
    loss_fns = set()
    for scope in [None, *[d for defs in m.functions.values() for d in defs]]:
        loss_fns |= set(m.bound_to(scope, lambda v: isinstance(v, ast.Call) and last_name(v) == "CrossEntropyLoss"))
    for call in m.named_calls("cross_entropy", *{name.rpartition(".")[2] for name in loss_fns}):
        if (last_name(call) == "cross_entropy" or dotted(call.func) in loss_fns) and call.args:
            first = call.args[0]
            if isinstance(first, ast.Call) and (last_name(first) in SOFTMAXES):
                yield first, "DDP019", f"a {softmax_kind(first)}"
