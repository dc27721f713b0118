defmodule Grove.World.Game.Spec do
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
    * `:catch_up` - for a game with `catch_up/3`, how many ticks a zone
      nobody watches may owe before it runs them together (default `10`;
      `1` runs every tick when it falls due); see "Ticks nobody watches"
      in `Grove.Game`

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
    catch_up: 10,
    version: 0,
    hooks: %{}
  ]

  @typedoc """
  Which optional callbacks the module has; `enter` is `:layer` when the
  game's `enter_cells/0` says `enter/2` is called only on cells whose
  layer holds a value.
  """
  @type hooks :: %{
          optional(:cell | :join | :leave | :tick | :catch_up | :ticks? | :show | :look | :blocks) =>
            true,
          optional(:enter) => true | :layer
        }

  @type t :: %__MODULE__{
          module: module(),
          config: Game.config(),
          actions: %{atom() => [{atom(), Game.arg_type()}]},
          options: keyword(),
          tick: pos_integer() | :manual,
          save: pos_integer(),
          catch_up: pos_integer(),
          version: non_neg_integer(),
          hooks: hooks()
        }

  @max_data 16
  @max_data_string 255
  @int32 -2_147_483_648..2_147_483_647

  @hooks [
    cell: 3,
    join: 3,
    leave: 2,
    enter: 2,
    tick: 2,
    catch_up: 3,
    ticks?: 1,
    show: 1,
    look: 1,
    blocks: 1
  ]

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

    {own, game_options} = Keyword.split(options, [:tick, :save, :catch_up])

    for key <- [:tick, :save, :catch_up],
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
      catch_up: Keyword.get(own, :catch_up, 10),
      version: if(function_exported?(module, :version, 0), do: module.version(), else: 0),
      hooks: hooks!(module)
    }
  end

  def new!(other),
    do: raise(ArgumentError, "a game is a module or {module, options}, got: #{inspect(other)}")

  defp hooks!(module) do
    hooks =
      for {fun, arity} <- @hooks,
          function_exported?(module, fun, arity),
          into: %{},
          do: {fun, true}

    case hooks do
      %{enter: true} -> %{hooks | enter: enter_cells!(module)}
      _ -> hooks
    end
  end

  defp enter_cells!(module) do
    case if function_exported?(module, :enter_cells, 0), do: module.enter_cells(), else: :all do
      :all ->
        true

      :layer ->
        :layer

      other ->
        raise ArgumentError,
              "game #{inspect(module)}'s enter_cells/0 must answer :all or :layer, got: #{inspect(other)}"
    end
  end

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

            {name, for({arg, type} <- spec, do: {arg, arg_type!(type)})}

          other ->
            raise ArgumentError,
                  "#{inspect(module)}.actions/0 must map action names (atoms) to argument lists, got: #{inspect(other)}"
        end)

      other ->
        raise ArgumentError,
              "#{inspect(module)}.actions/0 must return a map, got: #{inspect(other)}"
    end
  end

  @doc """
  Checks an action's name and arguments against a game's `actions/0`:
  the action's name as an atom and its arguments as a map of atoms, with
  defaults filled in, or why not (`:unknown_action`, or `:bad_args` with
  a sentence naming the argument). Names may be atoms or strings (as
  they come off the wire); no atom is ever created.
  """
  @spec check(t() | module(), atom() | String.t(), map()) ::
          {:ok, atom(), map()}
          | {:error, :unknown_action, String.t()}
          | {:error, :bad_args, String.t()}
  def check(%__MODULE__{actions: actions}, name, args), do: check_in(actions, name, args)
  def check(module, name, args) when is_atom(module), do: check_in(module.actions(), name, args)

  defp check_in(actions, name, args) do
    case find_action(actions, name) do
      nil ->
        {:error, :unknown_action,
         "no action #{inspect(to_string(name))} in this game (#{action_names(actions)})"}

      {action, spec} ->
        case check_args(spec, args) do
          {:ok, checked} -> {:ok, action, checked}
          {:error, text} -> {:error, :bad_args, text}
        end
    end
  end

  defp find_action(actions, name) when is_atom(name) do
    case actions do
      %{^name => spec} -> {name, spec}
      _ -> nil
    end
  end

  defp find_action(actions, name) when is_binary(name),
    do: Enum.find(actions, fn {action, _spec} -> Atom.to_string(action) == name end)

  defp find_action(_actions, _name), do: nil

  defp action_names(actions) when map_size(actions) == 0, do: "it has none"

  defp action_names(actions),
    do: actions |> Map.keys() |> Enum.map(&Atom.to_string/1) |> Enum.sort() |> Enum.join(", ")

  defp check_args(spec, args) when is_map(args) do
    names = for {name, _type} <- spec, do: Atom.to_string(name)

    case Enum.find(Map.keys(args), &(to_string(&1) not in names)) do
      nil ->
        Enum.reduce_while(spec, {:ok, %{}}, fn {name, type}, {:ok, acc} ->
          case fetch_arg(args, name) do
            {:ok, value} ->
              case check_value(type, value) do
                {:ok, value} -> {:cont, {:ok, Map.put(acc, name, value)}}
                {:error, why} -> {:halt, {:error, "#{name}: #{why}"}}
              end

            :error ->
              case type do
                {:optional, _type, default} -> {:cont, {:ok, Map.put(acc, name, default)}}
                _ -> {:halt, {:error, "#{name}: missing"}}
              end
          end
        end)

      unknown when is_atom(unknown) or is_binary(unknown) ->
        {:error, "#{unknown}: not an argument of this action"}

      unknown ->
        {:error, "#{inspect(unknown)}: not an argument of this action"}
    end
  end

  defp check_args(_spec, args), do: {:error, "arguments must be a map, got: #{inspect(args)}"}

  defp fetch_arg(args, name) do
    case args do
      %{^name => value} -> {:ok, value}
      _ -> Map.fetch(args, Atom.to_string(name))
    end
  end

  defp check_value({:optional, type, _default}, value), do: check_value(type, value)

  defp check_value({:integer, min, max}, n) when is_integer(n) and n >= min and n <= max,
    do: {:ok, n}

  defp check_value({:integer, min, max}, _), do: {:error, "expected an integer in #{min}..#{max}"}

  defp check_value({:string, max}, s) when is_binary(s) and byte_size(s) <= max do
    if String.valid?(s), do: {:ok, s}, else: {:error, "expected UTF-8 text"}
  end

  defp check_value({:string, max}, _), do: {:error, "expected a string of at most #{max} bytes"}
  defp check_value(:boolean, b) when is_boolean(b), do: {:ok, b}
  defp check_value(:boolean, _), do: {:error, "expected true or false"}

  defp check_value({:one_of, values}, value) when is_atom(value) or is_binary(value) do
    case Enum.find(values, &(Atom.to_string(&1) == to_string(value))) do
      nil -> {:error, "expected one of #{Enum.map_join(values, ", ", &Atom.to_string/1)}"}
      atom -> {:ok, atom}
    end
  end

  defp check_value({:one_of, values}, _),
    do: {:error, "expected one of #{Enum.map_join(values, ", ", &Atom.to_string/1)}"}

  @doc """
  True when `data` may go to a client: a map of at most #{@max_data} atom
  or string names to 32-bit integers, strings of at most #{@max_data_string}
  bytes and booleans.
  """
  @spec data?(term()) :: boolean()
  def data?(data) when is_map(data) and map_size(data) <= @max_data do
    Enum.all?(data, fn {name, value} ->
      (is_atom(name) or (is_binary(name) and byte_size(name) <= 32)) and value?(value)
    end)
  end

  def data?(_data), do: false

  defp value?(n) when is_integer(n), do: n in @int32
  defp value?(b) when is_boolean(b), do: true
  defp value?(s) when is_binary(s), do: byte_size(s) <= @max_data_string and String.valid?(s)
  defp value?(_), do: false

  @doc "Checks a declared argument type; raises `ArgumentError` saying what is wrong."
  @spec arg_type!(term()) :: Game.arg_type()
  def arg_type!({:integer, min, max} = type)
      when is_integer(min) and is_integer(max) and min <= max,
      do: type

  def arg_type!({:string, max} = type) when is_integer(max) and max > 0 and max <= 1024,
    do: type

  def arg_type!(:boolean), do: :boolean

  def arg_type!({:one_of, [_ | _] = values} = type) do
    if Enum.all?(values, &is_atom/1), do: type, else: bad_type(type)
  end

  def arg_type!({:optional, type, _default} = optional) do
    _ = arg_type!(type)
    optional
  end

  def arg_type!(other), do: bad_type(other)

  defp bad_type(type),
    do:
      raise(
        ArgumentError,
        "#{inspect(type)} is not an argument type: {:integer, min, max}, {:string, max_bytes} " <>
          "(up to 1024), :boolean, {:one_of, [atom]} or {:optional, type, default}"
      )
end
