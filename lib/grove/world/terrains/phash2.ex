defmodule Grove.World.Terrains.Phash2 do
  @moduledoc false
  # `:erlang.phash2/2` of a tuple of small integers and atoms, worked out
  # step by step in Erlang: the same values, since the portable hash is
  # the same on every runtime (its function, `make_hash2` of the runtime,
  # mixes a tuple's arity, then each element in order, into a 32-bit
  # state with Bob Jenkins' mix), but a tuple's state after its first
  # elements can be kept and carried on from with each last element.
  #
  # Why: a zone's ground is some 7,000 draws of `{seed, salt, x, y}`
  # (`Grove.World.Terrains.Woodland`), each a call of the built-in that
  # sets up a hash that may yield, walks the tuple and mixes four times;
  # where the state after `{seed, salt, x` is kept for each column of the
  # area, a cell's draw is one mix. Checked against the built-in in the
  # tests, for any such tuple.
  #
  # Integers are those of `small?/1` (the runtime hashes larger ones
  # another way): callers check their range and draw with the built-in
  # outside it.

  import Bitwise

  @mask 0xFFFFFFFF
  # The hash's constants: the golden ratio, and its multiples the runtime
  # mixes atoms and arities with.
  @hconst 0x9E3779B9
  @hconst_3 0xDAA66D2B
  @hconst_9 0x8FF34781
  @small 134_217_728

  @typedoc "A hash's state: 32 bits."
  @type state :: 0..0xFFFFFFFF

  @doc "True when `n` is an integer hashed as `int/2` hashes it: within ±2^27."
  @spec small?(integer()) :: boolean()
  def small?(n), do: is_integer(n) and n >= -@small and n < @small

  @doc "The state of a tuple of `arity` elements before its first."
  @spec tuple(non_neg_integer()) :: state()
  def tuple(arity), do: mix(@hconst_9 + arity &&& @mask, @hconst_9, 0)

  @doc "The state after one more element, an integer for which `small?/1` holds."
  @spec int(state(), integer()) :: state()
  def int(state, n) when n >= 0 and n < @small, do: mix(@hconst + n &&& @mask, @hconst, state)

  def int(state, n) when n < 0 and n >= -@small do
    state = mix(@hconst - n &&& @mask, @hconst, state)
    mix(@hconst + n &&& @mask, @hconst, state)
  end

  @doc "The state after one more element, an atom."
  @spec atom(state(), atom()) :: state()
  def atom(0, atom) when is_atom(atom), do: :erlang.phash2(atom, 0x100000000)

  def atom(state, atom) when is_atom(atom),
    do: mix(@hconst_3 + :erlang.phash2(atom, 0x100000000) &&& @mask, @hconst_3, state)

  @doc "The draw in `0..range - 1` (`range` up to 2^32) that `:erlang.phash2/2` gives."
  @spec range(state(), pos_integer()) :: non_neg_integer()
  def range(state, 0x100000000), do: state
  def range(state, range), do: rem(state, range)

  # Bob Jenkins' mix of three 32-bit words, as the runtime mixes them;
  # the result is the third.
  @compile {:inline, mix: 3}
  defp mix(a, b, c) do
    a = bxor(a - b - c &&& @mask, c >>> 13)
    b = bxor(b - c - a &&& @mask, a <<< 8 &&& @mask)
    c = bxor(c - a - b &&& @mask, b >>> 13)
    a = bxor(a - b - c &&& @mask, c >>> 12)
    b = bxor(b - c - a &&& @mask, a <<< 16 &&& @mask)
    c = bxor(c - a - b &&& @mask, b >>> 5)
    a = bxor(a - b - c &&& @mask, c >>> 3)
    b = bxor(b - c - a &&& @mask, a <<< 10 &&& @mask)
    bxor(c - a - b &&& @mask, b >>> 15)
  end
end
