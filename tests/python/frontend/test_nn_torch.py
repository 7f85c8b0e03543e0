"""spora.nn against PyTorch with the same weights (skipped without torch).

Run with an interpreter that has torch, e.g.
    PYTHONPATH=build/python /work/venv-torch/bin/python -m pytest tests/python/frontend/test_nn_torch.py
"""
import numpy as np
import pytest

import spora
from spora import nn
from nn_testutil import np_

torch = pytest.importorskip("torch")
torch.set_num_threads(2)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def rnd(*s, seed=0):
    return np.random.default_rng(seed).standard_normal(s)


def copy_dense(dst, src):
    dst.weight.set_data(spora.Tensor(src.weight.detach().numpy()))
    dst.bias.set_data(spora.Tensor(src.bias.detach().numpy()))


def test_conv_pool_bn_stack_forward_and_grads():
    tc = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.BatchNorm2d(4),
                             torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                             torch.nn.Linear(4 * 2 * 2, 5)).double()
    sc = nn.SequentialCell(nn.Conv2d(3, 4, 3, stride=2, pad_mode="pad", padding=1, has_bias=True, dtype=spora.float64),
                           nn.BatchNorm2d(4, dtype=spora.float64), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                           nn.Dense(16, 5, dtype=spora.float64))
    copy_dense(sc[0], tc[0])
    copy_dense(sc[5], tc[5])
    tc.train()
    sc.set_train(True)
    x = rnd(3, 3, 9, 9)
    xt = t(x).requires_grad_()
    yt = tc(xt)
    ys = sc(spora.Tensor(x))
    np.testing.assert_allclose(np_(ys), yt.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np_(sc[1].moving_mean), tc[1].running_mean.numpy(), rtol=1e-9)
    np.testing.assert_allclose(np_(sc[1].moving_variance), tc[1].running_var.numpy(), rtol=1e-9)
    probe = rnd(3, 5, seed=1)
    (yt * t(probe)).sum().backward()
    _, grads = spora.value_and_grad(lambda x: (sc(x) * spora.Tensor(probe)).sum(), 0, sc.trainable_params())(
        spora.Tensor(x))
    gx, gw = grads
    np.testing.assert_allclose(np_(gx), xt.grad.numpy(), rtol=1e-8, atol=1e-11)
    torch_grads = [tc[0].weight.grad, tc[0].bias.grad, tc[1].weight.grad, tc[1].bias.grad, tc[5].weight.grad,
                   tc[5].bias.grad]
    for g, tg in zip(gw, torch_grads):
        np.testing.assert_allclose(np_(g), tg.numpy(), rtol=1e-8, atol=1e-11)


def test_transformer_encoder_layer_matches_torch():
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).double().eval()
    sl = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, dtype=spora.float64)
    sd = tl.state_dict()
    mapping = {"self_attn.in_proj_weight": "self_attn.in_proj_weight", "self_attn.in_proj_bias": "self_attn.in_proj_bias",
               "self_attn.out_proj.weight": "self_attn.out_proj.weight", "self_attn.out_proj.bias": "self_attn.out_proj.bias",
               "linear1.weight": "linear1.weight", "linear1.bias": "linear1.bias", "linear2.weight": "linear2.weight",
               "linear2.bias": "linear2.bias", "norm1.gamma": "norm1.weight", "norm1.beta": "norm1.bias",
               "norm2.gamma": "norm2.weight", "norm2.beta": "norm2.bias"}
    params = dict(sl.parameters_and_names())
    for ours, theirs in mapping.items():
        params[ours].set_data(spora.Tensor(sd[theirs].numpy()))
    x = rnd(2, 5, 8, seed=2)
    mask = np.triu(np.ones((5, 5), bool), 1)
    with torch.no_grad():
        want = tl(t(x), src_mask=t(mask)).numpy()
    np.testing.assert_allclose(np_(sl(spora.Tensor(x), src_mask=spora.Tensor(mask))), want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["sgd", "nesterov", "adam", "adamw"])
def test_optimizers_match_torch(name):
    rng = np.random.default_rng(3)
    init = [rng.standard_normal((4, 3)), rng.standard_normal(3)]
    grads = [[rng.standard_normal(a.shape) for a in init] for _ in range(6)]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    sp = [spora.Parameter(spora.Tensor(a), name=f"p{i}") for i, a in enumerate(init)]
    make = {"sgd": (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01),
                    lambda p: nn.SGD(p, 0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
            "nesterov": (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
                         lambda p: nn.SGD(p, 0.1, momentum=0.9, nesterov=True)),
            "adam": (lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1, amsgrad=True),
                     lambda p: nn.Adam(p, 0.01, weight_decay=0.1, amsgrad=True)),
            "adamw": (lambda p: torch.optim.AdamW(p, lr=0.01), lambda p: nn.AdamW(p, 0.01))}[name]
    topt, sopt = make[0](tp), make[1](sp)
    for gs in grads:
        for p, g in zip(tp, gs):
            p.grad = t(g).clone()
        topt.step()
        sopt([spora.Tensor(g) for g in gs])
    for a, b in zip(sp, tp):
        np.testing.assert_allclose(np_(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_losses_match_torch():
    x = rnd(6, 4, seed=4)
    y = np.array([0, 3, 1, 1, 2, -100])
    for smoothing in (0.0, 0.3):
        want = torch.nn.CrossEntropyLoss(label_smoothing=smoothing)(t(x), t(y)).item()
        got = float(np_(nn.CrossEntropyLoss(label_smoothing=smoothing)(spora.Tensor(x), spora.Tensor(y))))
        assert got == pytest.approx(want, rel=1e-12)
    p = np.abs(rnd(6, 4, seed=5))
    p /= p.sum(1, keepdims=True)
    want = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(t(x), t(p)).item()
    assert float(np_(nn.CrossEntropyLoss(label_smoothing=0.1)(spora.Tensor(x), spora.Tensor(p)))) == \
        pytest.approx(want, rel=1e-12)
    yb = (rnd(6, 4, seed=6) > 0).astype(np.float64)
    pw = np.array([1.0, 2.0, 0.5, 3.0])
    want = torch.nn.BCEWithLogitsLoss(pos_weight=t(pw))(t(x), t(yb)).item()
    assert float(np_(nn.BCEWithLogitsLoss(pos_weight=pw)(spora.Tensor(x), spora.Tensor(yb)))) == \
        pytest.approx(want, rel=1e-12)
