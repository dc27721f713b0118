defmodule Grove.Game.Spec do
  @moduledoc """
  A world's game as its zones use it: the module, its configuration, its
  actions checked once, and which of the optional callbacks it has, so
  that a zone never asks the code server on a move. Made by `new!/1` from
  the world's `:game` option (`module` or `{module, options}`); made again
  when the module is reloaded (`Grove.Reloader`).

  ## Options

  Besides its own (given to `init/1`), a game takes:

    * `:tick` - milliseconds between two `tick/2` calls in each zone, or
      `:manual` to tick with `Grove.World.Game.tick/1` (default `1000`);
      ignored when the game has no `tick/2`
    * `:save` - milliseconds between two saves of the zones' game state
      to the store, when the world has one (default `5000`)

  A game's `legend/0` may name a leaderboard, `board: %{tally: name,
  title: text, unit: text}`: the tally (`{:tally, name, key, delta}`
  effects) that `GET /game/board` shows, best first.
  """

  alias Grove.Game

  @enforce_keys [:module, :config, :actions]
  defstruct [
    :module,
    :config,
    :actions,
    options: [],
    tick: 1000,
    save: 5000,
    version: 0,
    hooks: %{}
  ]

  @typedoc "Which optional callbacks the module has."
  @type hooks :: %{
          optional(:cell | :join | :leave | :enter | :tick | :show | :look | :blocks) => true
        }

  @type t :: %__MODULE__{
          module: module(),
          config: Game.config(),
          actions: %{atom() => [{atom(), Game.arg_type()}]},
          options: keyword(),
          tick: pos_integer() | :manual,
          save: pos_integer(),
          version: non_neg_integer(),
          hooks: hooks()
        }

  @hooks [cell: 3, join: 3, leave: 2, enter: 2, tick: 2, show: 1, look: 1, blocks: 1]

  @doc """
  Checks a game and makes its spec; `nil` and `false` are no game.
  Raises `ArgumentError` saying what is wrong.
  """
  @spec new!(module() | {module(), keyword()} | nil | false) :: t() | nil
  def new!(nil), do: nil
  def new!(false), do: nil
  def new!(module) when is_atom(module), do: new!({module, []})

  def new!({module, options}) when is_atom(module) and is_list(options) do
    unless Code.ensure_loaded?(module),
      do: raise(ArgumentError, "game #{inspect(module)} is not a module that exists")

    for {fun, arity} <- [actions: 0, act: 2], not function_exported?(module, fun, arity) do
      raise ArgumentError,
            "game #{inspect(module)} does not define #{fun}/#{arity} (see Grove.Game)"
    end

    {own, game_options} = Keyword.split(options, [:tick, :save])

    for key <- [:tick, :save],
        value = own[key],
        not (is_integer(value) and value > 0) and not (key == :tick and value == :manual) do
      raise ArgumentError,
            "game option #{inspect(key)} must be a positive integer, got: #{inspect(value)}"
    end

    config =
      if function_exported?(module, :init, 1), do: module.init(game_options), else: game_options

    %__MODULE__{
      module: module,
      config: config,
      actions: actions!(module),
      options: options,
      tick: Keyword.get(own, :tick, 1000),
      save: Keyword.get(own, :save, 5000),
      version: if(function_exported?(module, :version, 0), do: module.version(), else: 0),
      hooks:
        for(
          {fun, arity} <- @hooks,
          function_exported?(module, fun, arity),
          into: %{},
          do: {fun, true}
        )
    }
  end

  def new!(other),
    do: raise(ArgumentError, "a game is a module or {module, options}, got: #{inspect(other)}")

  @doc "The spec of the same game and options once its module's code changed."
  @spec renew!(t()) :: t()
  def renew!(%__MODULE__{module: module, options: options}), do: new!({module, options})

  @doc "The game's legend for clients (`legend/0`, or an empty one)."
  @spec legend(t()) :: map()
  def legend(%__MODULE__{module: module}) do
    if function_exported?(module, :legend, 0), do: module.legend(), else: %{}
  end

  @doc """
  The game as clients learn of it (`GET /game`, docs/protocol.md): its
  name, its actions with their arguments and how to ask for them, and its
  legend, as JSON-ready maps with string keys (jiffy's: null is `:null`).
  """
  @spec describe(t() | nil, boolean()) :: map()
  def describe(spec, tallied \\ false)
  def describe(nil, _tallied), do: %{"game" => :null}

  def describe(%__MODULE__{module: module} = spec, tallied) do
    legend = legend(spec)
    name = Map.get(legend, :name) || module |> Module.split() |> List.last() |> Macro.underscore()
    shown = Map.get(legend, :actions, %{})

    actions =
      Map.new(spec.actions, fn {action, args} ->
        how = jsonable(Map.get(shown, action, %{}))

        {Atom.to_string(action),
         Map.put(
           how,
           "args",
           for({arg, type} <- args, do: [Atom.to_string(arg), describe_type(type)])
         )}
      end)

    %{
      "game" => to_string(name),
      "title" => to_string(Map.get(legend, :title, name)),
      "help" => to_string(Map.get(legend, :help, "")),
      "actions" => actions,
      "cells" => jsonable(Map.get(legend, :cells, %{})),
      "looks" => jsonable(Map.get(legend, :looks, %{})),
      "events" => jsonable(Map.get(legend, :events, %{})),
      "reasons" => jsonable(Map.get(legend, :reasons, %{})),
      # A leaderboard only where the world keeps its tallies.
      "board" => if(tallied, do: board(Map.get(legend, :board)), else: :null)
    }
  end

  defp board(%{title: title} = board),
    do: %{"title" => to_string(title), "unit" => to_string(Map.get(board, :unit, ""))}

  defp board(_none), do: :null

  defp describe_type({:integer, min, max}), do: "integer #{min} #{max}"
  defp describe_type({:string, max}), do: "string #{max}"
  defp describe_type(:boolean), do: "boolean"

  defp describe_type({:one_of, values}),
    do: "one of " <> Enum.map_join(values, " ", &Atom.to_string/1)

  defp describe_type({:optional, type, _default}), do: "optional " <> describe_type(type)

  defp jsonable(map) when is_map(map),
    do: Map.new(map, fn {key, value} -> {to_string(key), jsonable(value)} end)

  defp jsonable(list) when is_list(list), do: Enum.map(list, &jsonable/1)
  # JSON's null is :null to jiffy, which writes nil as the string "nil".
  defp jsonable(nil), do: :null
  defp jsonable(value) when is_boolean(value), do: value
  defp jsonable(value) when is_atom(value), do: Atom.to_string(value)
  defp jsonable(value), do: value

  defp actions!(module) do
    case module.actions() do
      actions when is_map(actions) ->
        Map.new(actions, fn
          {name, spec} when is_atom(name) and is_list(spec) ->
            unless Keyword.keyword?(spec),
              do:
                raise(
                  ArgumentError,
                  "#{inspect(module)}.actions/0: #{name}'s arguments must be a keyword list"
                )

            {name, for({arg, type} <- spec, do: {arg, Game.arg_type!(type)})}

          other ->
            raise ArgumentError,
                  "#{inspect(module)}.actions/0 must map action names (atoms) to argument lists, got: #{inspect(other)}"
        end)

      other ->
        raise ArgumentError,
              "#{inspect(module)}.actions/0 must return a map, got: #{inspect(other)}"
    end
  end
end
