defmodule Grove.World.ChatLog do
  @moduledoc false
  # The lines said last in a world, and nothing more: a ring of `size`
  # slots in an ETS table, written by the zones (each line goes to slot
  # `n rem size`, `n` counted in an atomic), read by the operator's
  # endpoint. A line older than the last `size` is overwritten, so what is
  # said never piles up; nothing of it is written to disk or to the log.

  defstruct [:table, :count, size: 0]

  @type t :: %__MODULE__{
          table: :ets.tid() | nil,
          count: :atomics.atomics_ref() | nil,
          size: non_neg_integer()
        }

  @type line :: %{
          at: integer(),
          id: non_neg_integer(),
          x: non_neg_integer(),
          y: non_neg_integer(),
          text: String.t()
        }

  @doc "A log of the last `size` lines; `0` keeps none."
  @spec new(non_neg_integer()) :: t()
  def new(0), do: %__MODULE__{}

  def new(size) when is_integer(size) and size > 0 do
    %__MODULE__{
      table: :ets.new(:grove_chat_log, [:set, :public, write_concurrency: true]),
      count: :atomics.new(1, signed: false),
      size: size
    }
  end

  @doc "Keeps a line, in place of the oldest when the log is full."
  @spec record(t(), non_neg_integer(), {non_neg_integer(), non_neg_integer()}, String.t()) :: :ok
  def record(%__MODULE__{size: 0}, _id, _cell, _text), do: :ok

  def record(%__MODULE__{} = log, id, {x, y}, text) do
    n = :atomics.add_get(log.count, 1, 1)

    :ets.insert(
      log.table,
      {rem(n, log.size), n, System.system_time(:millisecond), id, x, y, text}
    )

    :ok
  end

  @doc "The last `limit` lines kept, oldest first."
  @spec recent(t(), non_neg_integer()) :: [line()]
  def recent(%__MODULE__{size: 0}, _limit), do: []

  def recent(%__MODULE__{} = log, limit) do
    log.table
    |> :ets.tab2list()
    |> Enum.sort_by(&elem(&1, 1))
    |> Enum.take(-min(limit, log.size))
    |> Enum.map(fn {_slot, _n, at, id, x, y, text} ->
      %{at: at, id: id, x: x, y: y, text: text}
    end)
  end

  @doc "How many lines the log holds now, and how many it may hold."
  @spec usage(t()) :: {non_neg_integer(), non_neg_integer()}
  def usage(%__MODULE__{size: 0}), do: {0, 0}
  def usage(%__MODULE__{} = log), do: {:ets.info(log.table, :size), log.size}
end
