defmodule Grove.World.Rules do
  @moduledoc """
  The rules every move and join obeys, each one configurable.

  ## Options

    * `:bounds` - moves off the edge of the world are rejected with
      `:out_of_bounds`; when `false` the world wraps around like a torus
      (default `true`)
    * `:blocking` - trees, rocks and water cannot be entered; rejected with
      `:blocked` (default `true`)
    * `:exclusive` - two entities never share a cell; rejected with
      `:occupied` (default `true`)
    * `:move_rate` - moves per second an entity may make on average, or `nil`
      for no limit; extra moves are rejected with `:rate_limited` (default `20`)
    * `:move_burst` - moves an entity may make at once after standing still
      (default `10`)
  """

  defstruct bounds: true,
            blocking: true,
            exclusive: true,
            move_rate: 20,
            move_burst: 10,
            move_limit: nil

  @type t :: %__MODULE__{
          bounds: boolean(),
          blocking: boolean(),
          exclusive: boolean(),
          move_rate: pos_integer() | nil,
          move_burst: pos_integer(),
          move_limit: Grove.RateLimit.t() | nil
        }

  @doc "Validates rule options into a struct; raises `ArgumentError` on a bad value."
  @spec new(keyword()) :: t()
  def new(opts \\ []) do
    defaults = %__MODULE__{} |> Map.from_struct() |> Map.delete(:move_limit) |> Map.to_list()
    opts = Keyword.validate!(opts, defaults)

    for key <- [:bounds, :blocking, :exclusive], not is_boolean(opts[key]) do
      raise ArgumentError,
            "rule #{inspect(key)} must be true or false, got: #{inspect(opts[key])}"
    end

    unless is_nil(opts[:move_rate]) or (is_integer(opts[:move_rate]) and opts[:move_rate] > 0) do
      raise ArgumentError,
            "rule :move_rate must be a positive integer or nil, got: #{inspect(opts[:move_rate])}"
    end

    unless is_integer(opts[:move_burst]) and opts[:move_burst] > 0 do
      raise ArgumentError,
            "rule :move_burst must be a positive integer, got: #{inspect(opts[:move_burst])}"
    end

    limit = if opts[:move_rate], do: Grove.RateLimit.new(opts[:move_rate], opts[:move_burst])
    struct!(__MODULE__, Keyword.put(opts, :move_limit, limit))
  end
end
