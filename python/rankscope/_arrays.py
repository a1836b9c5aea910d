"""numpy arrays and torch tensors in, the same kind out, without copies where the layout allows.

The engine reads numpy arrays through the buffer protocol (no copy, any strides). A CPU torch tensor reaches it as
`t.detach().numpy()`, a view of the same memory, and results go back through `torch.from_numpy`, again a view.
The module is built against the torch of the Python it is installed into (the project venv's PyPI torch 2.13 under
`make`; a user's venv torch under `pip install .`), so that torch and the engine share one libtorch and this is the
same memory either way; bfloat16 tensors (no numpy dtype) are converted to float32, a copy.
"""
from __future__ import annotations

import numbers
import sys
from typing import Any, Tuple

import numpy as np

from . import _rankscope


def error(message: str, where: str = "") -> Exception:
    """A rankscope.Error with the command line's one-line message: '<message> (<where>)'."""
    instance = _rankscope.Error(f"{message} ({where})" if where else message)
    instance.where = where
    return instance


def names(value: Any, name: str) -> Any:
    """A list of names from a list or tuple, or from one name: centers="mean" is ["mean"], not its letters. None stays
    None; an empty list is an error (None means every one)."""
    if value is None:
        return None
    listed = [value] if isinstance(value, str) else list(value)
    if not listed:
        raise error(f"no {name} given (leave it out for every one)", name)
    return listed


def flag(value: Any, name: str) -> bool:
    """A True/False setting: anything else is an error naming it (the binding's TypeError listed its whole private
    signature)."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{value!r} is not True or False", name)
    return bool(value)


def values(value: Any, name: str) -> list:
    """A list of numbers from a list, tuple, numpy array or pandas Series, or from one number: depths=4 is [4] (it was
    "'int' object is not iterable"; a Series was "truth value ... is ambiguous"). A string or an empty list is an error
    naming the setting; each entry is checked by the caller (check_range, check_count)."""
    if isinstance(value, numbers.Number) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return [value.item() if isinstance(value, np.ndarray) else value]
    if isinstance(value, (str, bytes)):
        raise error(f"{value!r} is text, not a number or a list of numbers", name)
    try:
        listed = list(value)
    except TypeError:
        raise error(f"{type(value).__name__} is not a number or a list of numbers", name) from None
    if not listed:
        raise error(f"no {name} given", name)
    return listed


def _torch_tensor_type():
    torch = sys.modules.get("torch")  # a torch tensor can only exist once torch is imported
    return torch.Tensor if torch is not None else None


def is_torch(x: Any) -> bool:
    tensor = _torch_tensor_type()
    return tensor is not None and isinstance(x, tensor)


def to_engine(x: Any, name: str = "x") -> Tuple[np.ndarray, bool]:
    """(a numpy view of x, whether x was a torch tensor). Lists and scalars become numpy arrays (a copy)."""
    if is_torch(x):
        if x.device.type != "cpu":
            raise error(f"a tensor on {x.device}: rankscope computes on the CPU, pass {name}.cpu()", name)
        tensor = x.detach()
        if tensor.dtype == sys.modules["torch"].bfloat16:
            tensor = tensor.float()
        if tensor.is_conj():
            tensor = tensor.resolve_conj()
        if tensor.is_neg():
            tensor = tensor.resolve_neg()
        return tensor.numpy(), True
    array = np.asarray(x)
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if any(stride < 0 for stride in array.strides):  # x[::-1]: ATen has no negative strides, so a copy
        array = np.ascontiguousarray(array)
    return array, False


def stored_epsilon(x: Any, array: np.ndarray) -> float:
    """The machine epsilon of the dtype x's values are stored in (a bfloat16 tensor reaches the engine as float32);
    float64's for integers."""
    if is_torch(x) and x.dtype.is_floating_point:
        return float(sys.modules["torch"].finfo(x.dtype).eps)
    return float(np.finfo(array.dtype if np.issubdtype(array.dtype, np.floating) else np.float64).eps)


def from_engine(array: np.ndarray, torch_out: bool) -> Any:
    """The engine's result as numpy, or as a torch tensor sharing its memory."""
    if torch_out:
        import torch

        return torch.from_numpy(array)
    return array


def map_arrays(values: dict, torch_out: bool) -> dict:
    return {name: from_engine(value, torch_out) for name, value in values.items()}


def check_range(value: float, low: float, high: float, name: str, low_open: bool = False) -> None:
    """The command line's range check for a numeric option: '<value> is outside [low, high] (<name>)'."""
    def text(number: float) -> str:
        if isinstance(number, numbers.Integral):  # exact, and no float() overflow for 10**400
            return str(int(number))
        return str(int(number)) if float(number).is_integer() else repr(float(number))

    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # "1e-3" met '<=' with a TypeError
        raise error(f"{value!r} is not a number", name)
    if not (value <= high and (value > low if low_open else value >= low)):
        raise error(f"{text(value) if isinstance(value, (int, float)) else value} is outside "
                    f"{'(' if low_open else '['}{text(low)}, {text(high)}]", name)


def check_count(value: Any, low: int, high: int, name: str) -> None:
    """check_range for a whole-number setting (layers, seed, ...): 2.5, True or "3" is an error naming the setting,
    not the binding's TypeError listing every signature."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{value!r} is not a whole number", name)
    check_range(int(value), low, high, name)


def zero_one_mask(mask: Any, name: str = "attention_mask") -> np.ndarray:
    """An attention mask as booleans (True: a real token): booleans, or numbers that are all 0 or 1 (any dtype, as
    tokenizers and torch users write them); anything else is an error naming the setting."""
    array = to_engine(mask, name)[0]
    if array.dtype == np.bool_:
        return array
    if array.dtype.kind not in "biuf" or not np.isin(array, (0, 1)).all():
        raise error("entries other than 0 and 1 (1 or True: a real token; 0 or False: padding)", name)
    return array.astype(np.bool_)


def attention_mask_ids(mask: Any) -> Any:
    """An attention mask as the engine takes it (zero_one_mask's rule): int64 1 for a real token, 0 for padding; None
    stays None."""
    return None if mask is None else zero_one_mask(mask).astype(np.int64)
