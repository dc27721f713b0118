defmodule Grove.Gateway.Clock do
  @moduledoc false
  # The clock of an HTTP request: when it began, the deadline it keeps, and
  # where it waited on its way to a handler.
  #
  # A request begins when its connection was accepted (the first request of
  # a connection: the client has been waiting since it connected) or when
  # its request line arrived (the next ones on a kept-alive connection).
  # The front door, which reads every head in the connection's own
  # process, notes those instants in the process's dictionary; the API's
  # handler then reads them, records how long each stage took, and gets
  # the request's deadline: its beginning plus the gateway's
  # `:request_deadline`. Every wait after that (a permit to hash a
  # password, the store's queue and database) is bounded by what is left
  # of it, so a request that cannot be served in time is answered 503 by
  # its deadline, wherever it waited.
  #
  # Stages, each a histogram in microseconds:
  #
  #   * `accept` - from the accept to the request line read (the first
  #     request of a connection): the time a new connection waits for its
  #     process to be scheduled and read it
  #   * `head` - from the request line to the end of the head
  #   * `handler` - from the end of the head to the API's handler: Yaws's
  #     dispatch and the body's read
  #   * `upgrade` - the same for a WebSocket upgrade, to `/ws`'s handler:
  #     apart, so that a join storm's upgrades, which wait for a server
  #     busy starting players, do not hide in the API's waits (nor the
  #     API's in theirs)
  #
  # and requests answered late, by where the deadline caught them:
  # `arrival` (it had passed before the handler began), `password` (no
  # permit in time), `store` (the store could not answer in time),
  # `upgrade` (a WebSocket upgrade that waited past the gateway's
  # `:upgrade_deadline` before its handler or for its connection's start:
  # a server too busy to start more players in time).

  alias Grove.Metrics.Histogram

  @stages [:accept, :head, :handler, :upgrade]
  @late [:arrival, :password, :store, :upgrade]

  @accepted {__MODULE__, :accepted}
  @began {__MODULE__, :began}
  @line {__MODULE__, :line}
  @head {__MODULE__, :head}

  for {key, index} <- Enum.with_index(@late, 1) do
    defp late_index(unquote(key)), do: unquote(index)
  end

  @type t :: %{waits: %{atom() => Histogram.t()}, late: :counters.counters_ref()}

  @doc "New histograms and counters, made once by the gateway."
  @spec new() :: t()
  def new,
    do: %{
      waits: Map.new(@stages, &{&1, Histogram.new()}),
      late: :counters.new(length(@late), [:write_concurrency])
    }

  @doc "The stages a request waits in before its handler."
  @spec stages() :: [atom()]
  def stages, do: @stages

  @doc "Where late requests are counted."
  @spec late_stages() :: [atom()]
  def late_stages, do: @late

  ## In the connection's process, from the front door

  @doc "The connection was just accepted."
  @spec accepted() :: :ok
  def accepted do
    Process.put(@accepted, now())
    :ok
  end

  @doc "A request line just arrived."
  @spec request_line() :: :ok
  def request_line do
    now = now()

    began =
      case Process.delete(@accepted) do
        nil ->
          now

        accepted ->
          forget_accepted()
          record(:accept, now - accepted)
          accepted
      end

    Process.put(@began, began)
    Process.put(@line, now)
    Process.delete(@head)
    :ok
  end

  # Yaws puts back, before each request of a connection, the dictionary
  # its process had when the connection began (kept under `init_db`),
  # which holds the accept instant: taken out there too, it counts for the
  # first request alone.
  defp forget_accepted do
    case Process.get(:init_db) do
      saved when is_list(saved) -> Process.put(:init_db, List.keydelete(saved, @accepted, 0))
      _ -> :ok
    end
  end

  @doc "The request's head has been read."
  @spec head_read() :: :ok
  def head_read do
    now = now()

    case Process.get(@line) do
      nil -> :ok
      line -> record(:head, now - line)
    end

    Process.put(@head, now)
    :ok
  end

  ## In the handler

  @doc """
  The request's deadline, in `System.monotonic_time(:millisecond)`, given
  the gateway's `:request_deadline` (or the setting `budget` names);
  records the wait from the end of the head as `stage` (`:handler`, or
  `:upgrade` for a WebSocket upgrade). A request whose beginning was not
  seen (a test calling a handler directly) begins now.
  """
  @spec deadline(map(), atom(), :handler | :upgrade) :: integer()
  def deadline(config, budget \\ :request_deadline, stage \\ :handler) do
    budget = Map.fetch!(config, budget)
    now = now()

    case Process.get(@head) do
      nil -> :ok
      head -> record(stage, now - head)
    end

    began = Process.get(@began, now)
    # Monotonic time may be negative: rounded down, as the clock rounds it.
    Integer.floor_div(began, 1000) + budget
  end

  @doc "Milliseconds left before `deadline`; zero or less when it has passed."
  @spec left(integer()) :: integer()
  def left(deadline), do: deadline - System.monotonic_time(:millisecond)

  @doc "Counts a request answered 503 because its deadline caught it at `stage`."
  @spec late(atom()) :: :ok
  def late(stage) do
    case clock() do
      nil -> :ok
      %{late: late} -> :counters.add(late, late_index(stage), 1)
    end
  end

  @doc "The waits' histograms (in stage order) and the late counts, for exporters."
  @spec read(t()) :: %{waits: [{atom(), Histogram.t()}], late: [{atom(), integer()}]}
  def read(%{waits: waits, late: late}) do
    %{
      waits: for(stage <- @stages, do: {stage, Map.fetch!(waits, stage)}),
      late: for(stage <- @late, do: {stage, :counters.get(late, late_index(stage))})
    }
  end

  defp record(stage, micros) do
    case clock() do
      nil -> :ok
      %{waits: waits} -> Histogram.record(Map.fetch!(waits, stage), max(micros, 0))
    end
  end

  defp clock do
    case Grove.Gateway.lookup() do
      %{clock: clock} -> clock
      _ -> nil
    end
  end

  defp now, do: System.monotonic_time(:microsecond)
end
