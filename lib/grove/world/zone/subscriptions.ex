defmodule Grove.World.Zone.Subscriptions do
  @moduledoc false
  # Who watches a zone: each viewer process, by the format it reads, with
  # the entities it watches through (a player's session watches through
  # its one entity; a process may hold several), how many viewers read
  # each format (the tick encodes its delta once per format read), and how
  # many watch from each other node (each such node's relay gets the delta
  # once). Plain data, inside `Grove.World.Zone.Views`, which says from it
  # what the zone process sends, monitors and writes.
  #
  #     iex> alias Grove.World.Zone.Subscriptions
  #     iex> subs = Subscriptions.new(node())
  #     iex> {subs, :new} = Subscriptions.subscribe(subs, {self(), :json}, 7, :ref)
  #     iex> {subs, :added} = Subscriptions.subscribe(subs, {self(), :json}, 8, :unused)
  #     iex> Subscriptions.formats(subs)
  #     [:json]
  #     iex> {subs, :kept} = Subscriptions.unsubscribe(subs, {self(), :json}, 7)
  #     iex> {subs, {:last, :ref}} = Subscriptions.unsubscribe(subs, {self(), :json}, 8)
  #     iex> Subscriptions.watched?(subs)
  #     false

  alias Grove.World.Entity

  defstruct [:node, viewers: %{}, formats: %{}, nodes: %{}]

  @typedoc "A viewer: its process and the format it reads."
  @type viewer :: {pid(), term()}

  @type t :: %__MODULE__{
          node: node(),
          viewers: %{viewer() => {reference() | term(), MapSet.t(Entity.id())}},
          formats: %{term() => pos_integer()},
          nodes: %{node() => pos_integer()}
        }

  @doc "No viewer yet, on `node` (viewers elsewhere count per node)."
  @spec new(node()) :: t()
  def new(node), do: %__MODULE__{node: node}

  @doc "True while anyone watches."
  @spec watched?(t()) :: boolean()
  def watched?(%__MODULE__{viewers: viewers}), do: map_size(viewers) > 0

  @doc """
  True when the process `pid` is the only viewer (in one format); with
  `:any`, when there is one viewer, whoever it is.
  """
  @spec only?(t(), pid() | :any) :: boolean()
  def only?(%__MODULE__{viewers: viewers}, :any), do: map_size(viewers) == 1

  def only?(%__MODULE__{viewers: viewers}, pid) when map_size(viewers) == 1,
    do: match?([{^pid, _format}], Map.keys(viewers))

  def only?(_subs, _pid), do: false

  @doc "True when the viewer watches the zone."
  @spec member?(t(), viewer()) :: boolean()
  def member?(subs, viewer), do: is_map_key(subs.viewers, viewer)

  @doc "The viewers, each with its monitor."
  @spec viewers(t()) :: [{viewer(), reference() | term()}]
  def viewers(subs), do: for({viewer, {ref, _ids}} <- subs.viewers, do: {viewer, ref})

  @doc "The formats viewers read."
  @spec formats(t()) :: [term()]
  def formats(subs), do: Map.keys(subs.formats)

  @doc "The other nodes viewers watch from."
  @spec nodes(t()) :: [node()]
  def nodes(subs), do: Map.keys(subs.nodes)

  @doc """
  A viewer watches through an entity: `:added` when it watched already
  (subscribing is idempotent), `:new` when it did not, with `ref`, the
  monitor its caller put on it, kept; `{:new, node}` when it is the first
  viewer on another node, which must be told where the zone's deltas are.
  """
  @spec subscribe(t(), viewer(), Entity.id(), reference() | term()) ::
          {t(), :added | :new | {:new, node()}}
  def subscribe(subs, {pid, format} = viewer, id, ref) do
    case subs.viewers do
      %{^viewer => {known, ids}} ->
        {%{subs | viewers: %{subs.viewers | viewer => {known, MapSet.put(ids, id)}}}, :added}

      _ ->
        subs = %{
          subs
          | viewers: Map.put(subs.viewers, viewer, {ref, MapSet.new([id])}),
            formats: Map.update(subs.formats, format, 1, &(&1 + 1))
        }

        watch_node(subs, node(pid))
    end
  end

  @doc """
  A viewer stops watching through an entity: `:none` when it did not,
  `:kept` when it still watches through another, `{:last, ref}` when it
  watches no more (its monitor goes, it is told).
  """
  @spec unsubscribe(t(), viewer(), Entity.id()) :: {t(), :none | :kept | {:last, term()}}
  def unsubscribe(subs, viewer, id) do
    case subs.viewers do
      %{^viewer => {ref, ids}} ->
        ids = MapSet.delete(ids, id)

        if MapSet.size(ids) == 0,
          do: {remove(subs, viewer), {:last, ref}},
          else: {%{subs | viewers: %{subs.viewers | viewer => {ref, ids}}}, :kept}

      _ ->
        {subs, :none}
    end
  end

  @doc "A viewer that died: all its subscriptions in that format go."
  @spec down(t(), viewer()) :: t()
  def down(subs, viewer), do: if(member?(subs, viewer), do: remove(subs, viewer), else: subs)

  @doc "The viewer's monitor, after its zone started again and monitored it anew."
  @spec monitored(t(), viewer(), reference()) :: t()
  def monitored(subs, viewer, ref) do
    case subs.viewers do
      %{^viewer => {_old, ids}} -> %{subs | viewers: %{subs.viewers | viewer => {ref, ids}}}
      _ -> subs
    end
  end

  defp remove(subs, {pid, format} = viewer) do
    %{
      subs
      | viewers: Map.delete(subs.viewers, viewer),
        formats: count_down(subs.formats, format),
        nodes: if(node(pid) == subs.node, do: subs.nodes, else: count_down(subs.nodes, node(pid)))
    }
  end

  defp watch_node(subs, node) when node == subs.node, do: {subs, :new}

  defp watch_node(subs, node) do
    case subs.nodes do
      %{^node => n} -> {%{subs | nodes: %{subs.nodes | node => n + 1}}, :new}
      _ -> {%{subs | nodes: Map.put(subs.nodes, node, 1)}, {:new, node}}
    end
  end

  # One fewer under `key`; none left, no key.
  defp count_down(counts, key) do
    case counts do
      %{^key => 1} -> Map.delete(counts, key)
      %{^key => n} -> Map.put(counts, key, n - 1)
      _ -> counts
    end
  end
end
