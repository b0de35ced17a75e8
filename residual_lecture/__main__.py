"""``python -m residual_lecture ARGS`` = ``residual-lecture ARGS`` = ``python render.py ARGS`` in a checkout."""

from residual_lecture import main

if __name__ == "__main__":
    main()
