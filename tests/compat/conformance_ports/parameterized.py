"""The part of the `parameterized` package upstream's tests use: `parameterized.expand(list_of_args)` on a
unittest method makes one method per argument list, named `<name>_<index>` (as the package names them for
non-string first arguments)."""
import functools
import inspect


class parameterized:
    @staticmethod
    def expand(params):
        def decorate(func):
            frame_locals = inspect.currentframe().f_back.f_locals
            for index, args in enumerate(params):
                args = tuple(args) if isinstance(args, (list, tuple)) else (args,)

                def method(self, _args=args):
                    return func(self, *_args)
                functools.update_wrapper(method, func)
                method.__name__ = f"{func.__name__}_{index}"
                frame_locals[method.__name__] = method
            return None
        return decorate
