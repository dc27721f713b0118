defmodule Grove.Load.Bot do
  @moduledoc false
  # One simulated player: a real WebSocket client (Grove.Load.WsClient) that
  # joins with views on, moves on its schedule and checks everything it is
  # told, in the spirit of OpenPoker's harness that checked every hand:
  #
  #   * its position follows from its acknowledged moves: an `ok` outcome is
  #     exactly one step from where it was in the direction it asked, a
  #     rejection leaves it where it was;
  #   * every outcome answers a move it sent, once;
  #   * a view never shows two entities on one cell, nor one on a tree,
  #     rock or water; its full views show the bot itself.
  #
  # Failures are counted by kind in Grove.Load.Stats, never raised.

  use GenServer

  alias Grove.Load.{Stats, WsClient}
  alias Grove.Protocol
  alias Grove.World.Grid

  @timeout_ms 5000
  @directions List.to_tuple(Grid.directions())

  defstruct [
    :host,
    :port,
    :path,
    :encoding,
    :stats,
    :terrain,
    :move_every,
    :client,
    :id,
    :cell,
    :rand,
    seq: 0,
    pending: %{},
    expired: MapSet.new(),
    bye: nil,
    view: %{},
    joined: false,
    closing: false
  ]

  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @impl true
  def init(opts) do
    bot = %__MODULE__{
      host: Keyword.fetch!(opts, :host),
      port: Keyword.fetch!(opts, :port),
      path: Keyword.fetch!(opts, :path),
      encoding: Keyword.fetch!(opts, :encoding),
      stats: Keyword.fetch!(opts, :stats),
      terrain: Keyword.fetch!(opts, :terrain),
      move_every: Keyword.fetch!(opts, :move_every),
      rand: :rand.seed_s(:exsss)
    }

    {:ok, bot, {:continue, :connect}}
  end

  @impl true
  def handle_continue(:connect, bot) do
    Stats.incr(bot.stats, :started)
    started = System.monotonic_time(:microsecond)

    case WsClient.connect(bot.host, bot.port, bot.path, timeout: 10_000) do
      {:ok, client} ->
        Grove.Metrics.Histogram.record(
          bot.stats.connect,
          System.monotonic_time(:microsecond) - started
        )

        Stats.incr(bot.stats, :connected)
        bot = %{bot | client: client}
        push(bot, %{type: :join, view_radius: 8, name: "", token: ""})
        {:noreply, bot}

      {:error, _reason} ->
        Stats.incr(bot.stats, :connect_failures)
        {:stop, :normal, bot}
    end
  end

  @impl true
  def handle_info({:tcp, _socket, data}, bot) do
    Stats.incr(bot.stats, :bytes_in, byte_size(data))
    {frames, client} = WsClient.feed(bot.client, data)
    bot = %{bot | client: client}

    case Enum.reduce_while(frames, bot, &frame/2) do
      {:closed, reason, bot} ->
        Stats.disconnect(bot.stats, reason)
        {:stop, :normal, bot}

      bot ->
        {:noreply, bot}
    end
  end

  def handle_info({:tcp_closed, _socket}, bot) do
    unless bot.closing, do: Stats.disconnect(bot.stats, bot.bye || :closed)
    {:stop, :normal, bot}
  end

  def handle_info({:tcp_error, _socket, _reason}, bot) do
    Stats.disconnect(bot.stats, :error)
    {:stop, :normal, bot}
  end

  def handle_info(:move, bot) do
    schedule_move(bot)
    bot = expire_pending(bot)

    # One move in flight at a time: the position check needs to know where
    # the bot stands when it sends.
    if map_size(bot.pending) == 0 do
      {n, rand} = :rand.uniform_s(8, bot.rand)
      direction = elem(@directions, n - 1)
      seq = bot.seq + 1
      push(bot, %{type: :move, seq: seq, dir: direction})
      Stats.incr(bot.stats, :moves_sent)

      pending =
        Map.put(bot.pending, seq, {System.monotonic_time(:microsecond), direction, bot.cell})

      {:noreply, %{bot | seq: seq, pending: pending, rand: rand}}
    else
      {:noreply, bot}
    end
  end

  def handle_info(:stop, bot) do
    if bot.client, do: WsClient.close(bot.client)
    {:stop, :normal, %{bot | closing: true}}
  end

  ## Frames

  # The server says why before it closes; the close code is the fallback.
  defp frame({:close, code, _reason}, bot),
    do: {:halt, {:closed, bot.bye || close_reason(code), bot}}

  defp frame({_kind, data}, bot) do
    Stats.incr(bot.stats, :frames_in)

    case Protocol.decode(data, bot.encoding) do
      {:ok, message} ->
        {:cont, message(message, bot)}

      {:error, _code, _text} ->
        Stats.incr(bot.stats, :protocol_errors)
        {:cont, bot}
    end
  end

  defp message(%{type: :welcome, id: id, x: x, y: y}, bot) do
    Stats.incr(bot.stats, :joined)
    bot = %{bot | id: id, cell: {x, y}, joined: true}
    # Spread the first moves over one interval.
    {delay, rand} = :rand.uniform_s(bot.move_every, bot.rand)
    Process.send_after(self(), :move, delay)
    %{bot | rand: rand}
  end

  defp message(%{type: :outcome, seq: seq, result: result, x: x, y: y}, bot) do
    case Map.pop(bot.pending, seq) do
      {nil, _} ->
        # A late answer to a move already counted as timed out is not a
        # second failure; it does say where the bot stands now.
        if MapSet.member?(bot.expired, seq) do
          %{bot | cell: {x, y}}
        else
          Stats.failure(bot.stats, :unexpected_outcome)
          bot
        end

      {{sent_at, direction, from}, pending} ->
        Grove.Metrics.Histogram.record(
          bot.stats.latency,
          System.monotonic_time(:microsecond) - sent_at
        )

        Stats.incr(bot.stats, :outcomes)
        expected = if result == :ok, do: Grid.step(from, direction), else: from
        if result == :ok, do: Stats.incr(bot.stats, :outcomes_ok)
        if {x, y} != expected, do: Stats.failure(bot.stats, :position)
        # Deltas leave out the player's own entity: its cell comes from here.
        view =
          if is_map_key(bot.view, bot.id), do: Map.put(bot.view, bot.id, {x, y}), else: bot.view

        %{bot | pending: pending, cell: {x, y}, view: view}
    end
  end

  defp message(%{type: :view} = view, bot) do
    Stats.incr(bot.stats, :view_frames)

    entities =
      if view.full,
        do: Map.new(view.entities, fn {id, x, y, _kind} -> {id, {x, y}} end),
        else:
          Enum.reduce(view.entities, Map.drop(bot.view, view.gone), fn {id, x, y, _kind}, acc ->
            Map.put(acc, id, {x, y})
          end)

    check_view(bot, entities, view.full)
    %{bot | view: entities}
  end

  defp message(%{type: :error}, bot) do
    Stats.incr(bot.stats, :protocol_errors)
    bot
  end

  defp message(%{type: :bye, reason: reason}, bot), do: %{bot | bye: reason}

  defp message(_other, bot), do: bot

  defp check_view(bot, entities, full) do
    # The bot's own cell comes from its outcomes, which run ahead of the
    # zones' ticks: it may step into a cell a neighbour left before the delta
    # saying so arrives. Stacking is judged on what the server reports.
    others = entities |> Map.delete(bot.id) |> Map.values()

    if length(others) != length(Enum.uniq(others)),
      do: Stats.failure(bot.stats, :stacked_view)

    cells = Map.values(entities)

    if Enum.any?(cells, fn {x, y} -> blocked?(bot.terrain, x, y) end),
      do: Stats.failure(bot.stats, :entity_on_blocked_cell)

    if full and not is_map_key(entities, bot.id),
      do: Stats.failure(bot.stats, :own_entity_missing)
  end

  defp blocked?(%{width: w, cells: cells}, x, y),
    do: x < w and y * w + x < byte_size(cells) and :binary.at(cells, y * w + x) in [1, 2, 3]

  ## Helpers

  defp expire_pending(bot) do
    now = System.monotonic_time(:microsecond)

    {expired, pending} =
      Enum.split_with(bot.pending, fn {_seq, {sent_at, _, _}} ->
        now - sent_at > @timeout_ms * 1000
      end)

    if expired != [], do: Stats.incr(bot.stats, :timeouts, length(expired))
    expired = Enum.reduce(expired, bot.expired, fn {seq, _}, set -> MapSet.put(set, seq) end)
    # A move that timed out leaves the bot unsure where it stands; trust the next outcome.
    %{bot | pending: Map.new(pending), expired: expired}
  end

  defp schedule_move(bot) do
    {jitter, _} = :rand.uniform_s(max(div(bot.move_every, 5), 1), bot.rand)
    Process.send_after(self(), :move, bot.move_every - div(bot.move_every, 10) + jitter)
  end

  defp push(bot, message) do
    frame = IO.iodata_to_binary(Protocol.encode(message, bot.encoding))
    kind = if bot.encoding == :json, do: :text, else: :binary
    Stats.incr(bot.stats, :bytes_out, byte_size(frame))
    _ = WsClient.send_frame(bot.client, {kind, frame})
    :ok
  end

  defp close_reason(1001), do: :shutdown
  defp close_reason(1008), do: :slow_consumer
  defp close_reason(1009), do: :too_large
  defp close_reason(_), do: :closed
end
