defmodule Grove.Shuttle do
  @moduledoc """
  A kind of actor for tests of residents: it steps in the direction its
  state names, then back, then out again, sensing nothing. Compiled with
  the test support, so that a peer node of a cluster test knows it as the
  test node does (a resident's kind goes with it across nodes).
  """
  @behaviour Grove.Actor

  @back %{n: :s, s: :n, e: :w, w: :e}

  @impl true
  def init(opts, _roll), do: Keyword.get(opts, :direction, :e)

  @impl true
  def step(direction, nil, _roll), do: {direction, Map.fetch!(@back, direction)}
end
