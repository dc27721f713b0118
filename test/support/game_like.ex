defmodule Grove.Test.GameLike do
  @moduledoc """
  A test's game made from another: `use Grove.Test.GameLike, of: game,
  keep: [callback, ...]` makes the module a `Grove.Game` whose callbacks
  named in `keep` are `game`'s own; the module writes those it changes.

      defmodule Stumbling do
        use Grove.Test.GameLike, of: Grove.AppleGame, keep: [:actions, :init, :act, :show]

        @impl true
        def cell({5, 2}, _ground, _config), do: raise("no orchard here")
        def cell(cell, ground, config), do: Grove.AppleGame.cell(cell, ground, config)
      end
  """

  defmacro __using__(opts) do
    game = Keyword.fetch!(opts, :of)
    callbacks = Grove.Game.behaviour_info(:callbacks)

    delegates =
      for name <- Keyword.fetch!(opts, :keep) do
        arity =
          Enum.find_value(callbacks, fn {callback, arity} -> if callback == name, do: arity end) ||
            raise ArgumentError, "#{inspect(name)} is not a callback of Grove.Game"

        args = Macro.generate_arguments(arity, __MODULE__)

        quote do
          @impl true
          defdelegate unquote(name)(unquote_splicing(args)), to: unquote(game)
        end
      end

    quote do
      @behaviour Grove.Game
      unquote_splicing(delegates)
    end
  end
end
