# One suite, run on both engines: Grove.StoreTest.SQLite and
# Grove.StoreTest.Postgres (against a real server, see Grove.PostgresServer).
for adapter <- [:sqlite, :postgres] do
  module = if adapter == :sqlite, do: SQLite, else: Postgres

  defmodule Module.concat(Grove.StoreTest, module) do
    use Grove.StoreCase, adapter: adapter, async: true

    alias Grove.Store.Account

    @names [
      "Robert'); DROP TABLE accounts;--",
      "100% \"real\" _x_",
      "semi;colon -- comment /* block */",
      "back\\slash \\' \\\\",
      "$1 ?1 :name @p %s ~s",
      "Ünïcødé 名前 🙂👩‍👩‍👧",
      "  spaced\ttabbed\nnewlined  "
    ]

    describe "accounts" do
      test "are created with defaults and fetched by id, name and device", %{store: store} do
        assert {:ok, %Account{} = account} =
                 Store.create_account(store, %{
                   name: "ada",
                   device_id: <<0, 1, 255, 254>>,
                   password_hash: <<0, 200, 3>>,
                   password_salt: "salt"
                 })

        assert %Account{name: "ada", device_id: <<0, 1, 255, 254>>, avatar: "🙂"} = account
        assert account.password_hash == <<0, 200, 3>> and account.password_salt == "salt"
        assert is_integer(account.id) and account.id > 0
        assert account.created_at == account.updated_at
        assert abs(account.created_at - System.os_time(:second)) < 60

        assert {:ok, ^account} = Store.fetch_account(store, {:id, account.id})
        assert {:ok, ^account} = Store.fetch_account(store, {:name, "ada"})
        assert {:ok, ^account} = Store.fetch_account(store, {:device, <<0, 1, 255, 254>>})
      end

      test "need no field at all, and nameless ones do not collide", %{store: store} do
        assert {:ok, %Account{name: nil, device_id: nil, password_hash: nil} = first} =
                 Store.create_account(store, %{})

        assert {:ok, second} = Store.create_account(store, %{avatar: "🦊"})
        assert second.id != first.id
        assert second.avatar == "🦊"
        assert {:ok, ^second} = Store.fetch_account(store, {:id, second.id})
      end

      test "are not found by what nobody has", %{store: store} do
        {:ok, _} = Store.create_account(store, %{name: "ada", device_id: "phone"})

        assert {:error, :not_found} = Store.fetch_account(store, {:id, 123_456})
        assert {:error, :not_found} = Store.fetch_account(store, {:name, "Ada"})
        assert {:error, :not_found} = Store.fetch_account(store, {:name, "ad%"})
        assert {:error, :not_found} = Store.fetch_account(store, {:device, "phone "})
      end

      test "have unique names and devices; names are case-sensitive", %{store: store} do
        {:ok, ada} = Store.create_account(store, %{name: "ada", device_id: "phone"})

        assert {:error, :name_taken} = Store.create_account(store, %{name: "ada"})
        assert {:error, :device_taken} = Store.create_account(store, %{device_id: "phone"})
        assert {:ok, %Account{name: "Ada"}} = Store.create_account(store, %{name: "Ada"})
        # A refused account left nothing behind.
        assert {:ok, ^ada} = Store.fetch_account(store, {:device, "phone"})
      end

      test "are updated, and keep what an update leaves out", %{store: store} do
        {:ok, ada} = Store.create_account(store, %{name: "ada", password_hash: "h1"})

        assert {:ok, updated} =
                 Store.update_account(store, ada.id, %{
                   name: "lovelace",
                   avatar: "🧮",
                   password_hash: "h2",
                   password_salt: <<1, 2>>
                 })

        assert %Account{name: "lovelace", avatar: "🧮", password_hash: "h2"} = updated
        assert updated.password_salt == <<1, 2>>
        assert updated.created_at == ada.created_at and updated.updated_at >= ada.updated_at
        assert {:ok, ^updated} = Store.fetch_account(store, {:name, "lovelace"})
        assert {:error, :not_found} = Store.fetch_account(store, {:name, "ada"})

        assert {:ok, %Account{avatar: "🐙", name: "lovelace", password_hash: "h2"}} =
                 Store.update_account(store, ada.id, %{avatar: "🐙"})

        assert {:ok, %Account{name: "lovelace"}} =
                 Store.update_account(store, ada.id, %{name: "lovelace"})
      end

      test "are not updated to a taken name, nor when missing", %{store: store} do
        {:ok, ada} = Store.create_account(store, %{name: "ada"})
        {:ok, _bob} = Store.create_account(store, %{name: "bob"})

        assert {:error, :name_taken} = Store.update_account(store, ada.id, %{name: "bob"})
        assert {:ok, ^ada} = Store.fetch_account(store, {:id, ada.id})
        assert {:error, :not_found} = Store.update_account(store, ada.id + 1000, %{avatar: "x"})
      end

      test "with SQL metacharacters and any Unicode in their names round-trip", %{store: store} do
        accounts =
          for name <- @names do
            assert {:ok, %Account{name: ^name} = account} =
                     Store.create_account(store, %{name: name, device_id: "device " <> name})

            account
          end

        for %Account{name: name} = account <- accounts do
          assert {:ok, ^account} = Store.fetch_account(store, {:name, name})
          assert {:ok, ^account} = Store.fetch_account(store, {:device, "device " <> name})
        end

        [first | _] = accounts

        assert {:ok, %Account{name: "it's"}} =
                 Store.update_account(store, first.id, %{name: "it's"})

        assert {:error, :not_found} = Store.fetch_account(store, {:name, "100%"})
      end

      test "refuse fields of the wrong shape with ArgumentError", %{store: store} do
        assert_raise ArgumentError, ~r/unknown account field :email/, fn ->
          Store.create_account(store, %{email: "a@b"})
        end

        assert_raise ArgumentError, ~r/NUL/, fn ->
          Store.create_account(store, %{name: "a\0b"})
        end

        assert_raise ArgumentError, fn -> Store.create_account(store, %{name: <<255>>}) end
        assert_raise ArgumentError, fn -> Store.create_account(store, %{device_id: 42}) end
        assert_raise ArgumentError, fn -> Store.update_account(store, 1, %{device_id: "x"}) end
        assert_raise ArgumentError, fn -> Store.update_account(store, 1, %{name: nil}) end
        assert_raise ArgumentError, fn -> Store.fetch_account(store, {:email, "a@b"}) end
        assert_raise ArgumentError, fn -> Store.fetch_account(store, {:id, 0}) end
        assert_raise ArgumentError, fn -> Store.fetch_account(store, {:id, 1}, wait: 5) end
        assert_raise ArgumentError, fn -> Store.fetch_token(store, 42) end
        assert_raise ArgumentError, fn -> Store.fetch_position(store, -1) end

        assert_raise ArgumentError, fn ->
          Store.save_positions(store, [%{account_id: 1, x: 1.5, y: 0}])
        end
      end
    end

    describe "tokens" do
      setup %{store: store} do
        {:ok, account} = Store.create_account(store, %{name: "ada"})
        %{account: account}
      end

      test "are created, fetched and revoked", %{store: store, account: account} do
        token_id = :crypto.strong_rand_bytes(32)
        expires_at = System.os_time(:second) + 3600

        assert :ok =
                 Store.create_token(store, %{
                   id: token_id,
                   account_id: account.id,
                   expires_at: expires_at
                 })

        assert {:ok, %{account_id: account_id, expires_at: ^expires_at, revoked: false}} =
                 Store.fetch_token(store, token_id)

        assert account_id == account.id
        assert :ok = Store.revoke_token(store, token_id)
        assert {:ok, %{revoked: true}} = Store.fetch_token(store, token_id)
        assert :ok = Store.revoke_token(store, token_id)
      end

      test "are not found when unknown", %{store: store, account: account} do
        :ok = Store.create_token(store, %{id: "known", account_id: account.id, expires_at: 0})

        assert {:error, :not_found} = Store.fetch_token(store, "unknown")
        assert {:error, :not_found} = Store.fetch_token(store, "known'--")
        assert {:error, :not_found} = Store.revoke_token(store, "unknown")
        assert {:ok, %{revoked: false}} = Store.fetch_token(store, "known")
      end

      test "need an account and a fresh id", %{store: store, account: account} do
        token = %{id: "t", account_id: account.id, expires_at: 1}
        :ok = Store.create_token(store, token)

        assert {:error, :token_taken} = Store.create_token(store, token)

        assert {:error, :not_found} =
                 Store.create_token(store, %{token | id: "u", account_id: 999})

        assert {:error, :not_found} = Store.fetch_token(store, "u")
      end
    end

    describe "positions" do
      test "are saved in batches and fetched; a save overwrites", %{store: store} do
        assert :ok =
                 Store.save_positions(store, [
                   %{account_id: 1, x: 10, y: 20},
                   %{account_id: 2, x: -5, y: 0},
                   %{account_id: 3, x: 999_999, y: 7}
                 ])

        assert {:ok, {10, 20}} = Store.fetch_position(store, 1)
        assert {:ok, {-5, 0}} = Store.fetch_position(store, 2)
        assert {:ok, {999_999, 7}} = Store.fetch_position(store, 3)
        assert {:error, :not_found} = Store.fetch_position(store, 4)

        assert :ok =
                 Store.save_positions(store, [
                   %{account_id: 2, x: 1, y: 1},
                   %{account_id: 4, x: 4, y: 4},
                   %{account_id: 2, x: 2, y: 2}
                 ])

        assert {:ok, {10, 20}} = Store.fetch_position(store, 1)
        assert {:ok, {2, 2}} = Store.fetch_position(store, 2)
        assert {:ok, {4, 4}} = Store.fetch_position(store, 4)
        assert :ok = Store.save_positions(store, [])
      end

      test "are saved in large batches in one go", %{store: store} do
        positions = for id <- 1..5000, do: %{account_id: id, x: id, y: -id}
        assert :ok = Store.save_positions(store, positions)
        assert {:ok, {4321, -4321}} = Store.fetch_position(store, 4321)
      end
    end

    describe "the game's state" do
      test "is saved in batches, fetched and listed by scope (keys alone too); nil deletes",
           %{store: store} do
        bytes = <<0, 255, 1, 0>>

        assert :ok =
                 Store.save_state(store, "zones", [
                   {"3,7", bytes},
                   {"0,0", "first"},
                   {"名前 🙂", ""},
                   {"0,0", "last wins"}
                 ])

        assert :ok = Store.save_state(store, "quests", [{"3,7", "another scope"}])
        assert {:ok, ^bytes} = Store.fetch_state(store, "zones", "3,7")
        assert {:ok, "last wins"} = Store.fetch_state(store, "zones", "0,0")
        assert {:ok, ""} = Store.fetch_state(store, "zones", "名前 🙂")
        assert {:ok, "another scope"} = Store.fetch_state(store, "quests", "3,7")
        assert {:error, :not_found} = Store.fetch_state(store, "zones", "9,9")

        assert {:ok, [{"0,0", "last wins"}, {"3,7", ^bytes}, {"名前 🙂", ""}]} =
                 Store.list_state(store, "zones")

        assert :ok = Store.save_state(store, "zones", [{"3,7", "new"}, {"0,0", nil}, {"x", nil}])
        assert {:ok, [{"3,7", "new"}, {"名前 🙂", ""}]} = Store.list_state(store, "zones")
        assert {:ok, []} = Store.list_state(store, "nobody")
        assert {:ok, keys} = Store.list_keys(store, "zones")
        assert Enum.sort(keys) == ["3,7", "名前 🙂"]
        assert {:ok, []} = Store.list_keys(store, "nobody")
        assert :ok = Store.save_state(store, "zones", [])
      end

      test "are saved in large batches, deletions among the values in their place",
           %{store: store} do
        keys = for n <- 1..1201, do: "zone #{n}"
        assert :ok = Store.save_state(store, "zones", for(key <- keys, do: {key, "old " <> key}))

        # Values past one statement's rows, a deletion between two runs of them.
        entries =
          for {key, n} <- Enum.with_index(keys, 1),
              do: {key, if(rem(n, 600) == 0, do: nil, else: "new " <> key)}

        assert :ok = Store.save_state(store, "zones", entries)
        assert {:ok, saved} = Store.list_state(store, "zones")
        assert length(saved) == 1199

        assert Map.new(saved) ==
                 Map.new(for {key, value} <- entries, value != nil, do: {key, value})

        assert {:error, :not_found} = Store.fetch_state(store, "zones", "zone 600")
        assert {:ok, "new zone 1201"} = Store.fetch_state(store, "zones", "zone 1201")
      end

      test "a key set then deleted, or deleted then set, ends as its last entry says; bytes kept",
           %{store: store, store_opts: opts} do
        # Zero bytes, bytes that are no UTF-8, and keys that would need
        # quoting in any literal.
        bytes = <<0, 255, 0, 192, 128, ?", ?\\, ?{, ?}, ?,>>

        keys = [
          "set, deleted",
          "deleted, set",
          "set, deleted, set",
          "{\"a\",\\b}",
          "NULL" | @names
        ]

        for key <- keys, do: assert(:ok = Store.save_state(store, "zones", [{key, "old"}]))

        # Through the store, which keeps each key's last entry, and through
        # the adapter itself, which is given every entry.
        saves = [
          fn entries -> Store.save_state(store, "zones", entries) end,
          fn entries ->
            %Store{adapter: adapter, adapter_config: config} = Store.new!(opts)
            {:ok, conn} = adapter.connect(config)

            try do
              adapter.save_state(conn, "zones", entries)
            after
              adapter.disconnect(conn)
            end
          end
        ]

        for save <- saves do
          assert :ok =
                   save.(
                     [
                       {"set, deleted", bytes},
                       {"deleted, set", nil},
                       {"set, deleted, set", bytes},
                       {"gone, set, deleted", "new"}
                     ] ++
                       for(key <- Enum.drop(keys, 3), do: {key, nil}) ++
                       [
                         {"set, deleted", nil},
                         {"deleted, set", bytes},
                         {"set, deleted, set", nil},
                         {"gone, set, deleted", nil}
                       ] ++
                       for(key <- Enum.drop(keys, 3), do: {key, key <> bytes}) ++
                       [{"set, deleted, set", "last " <> bytes}]
                   )

          assert {:ok, saved} = Store.list_state(store, "zones")

          assert saved ==
                   Enum.sort([
                     {"deleted, set", bytes},
                     {"set, deleted, set", "last " <> bytes}
                     | for(key <- Enum.drop(keys, 3), do: {key, key <> bytes})
                   ])

          # Back to where the next save starts.
          for key <- keys, do: assert(:ok = Store.save_state(store, "zones", [{key, "old"}]))
        end
      end

      test "refuses scopes, keys and values of the wrong shape", %{store: store} do
        for {scope, entries} <- [
              {"", [{"k", "v"}]},
              {:zones, [{"k", "v"}]},
              {"zones", [{"", "v"}]},
              {"zones", [{"k\0", "v"}]},
              {"zones", [{"k", :v}]},
              {"zones", [{<<255>>, "v"}]},
              {"zones", %{"k" => "v"}}
            ] do
          assert_raise ArgumentError, fn -> Store.save_state(store, scope, entries) end
        end

        assert_raise ArgumentError, fn -> Store.fetch_state(store, "zones", 1) end
        assert_raise ArgumentError, fn -> Store.list_state(store, nil) end
      end
    end

    describe "group commit" do
      # One worker, held up by a locked database, lets writes gather in the
      # queue: once the lock goes they must commit together.
      @tag store:
             [pool_size: 1] ++
               if(adapter == :sqlite,
                 do: [busy_timeout: 60_000],
                 else: [statement_timeout: 4_900]
               )
      test "commits what waits in one transaction, each write answered for itself", context do
        %{store: store} = context
        {:ok, taken} = Store.create_account(store, %{name: "taken"})
        release = hold_write_lock(context)

        blocker =
          Task.async(fn -> Store.create_account(store, %{name: "blocker"}, timeout: 60_000) end)

        eventually(fn -> assert %{running: 1} = Store.stats(store) end)

        writes = [
          fn -> Store.create_account(store, %{name: "a", device_id: "phone-a"}) end,
          fn -> Store.create_account(store, %{name: "taken"}) end,
          fn -> Store.save_positions(store, [%{account_id: taken.id, x: 1, y: 2}]) end,
          fn -> Store.save_state(store, "zones", [{"1,1", "state"}]) end,
          fn ->
            Store.create_account(store, %{
              device_id: "phone-b",
              token: %{id: "token-b", expires_at: 99}
            })
          end,
          fn -> Store.create_account(store, %{device_id: "phone-a"}) end
        ]

        tasks =
          for write <- writes do
            task = Task.async(fn -> write.() end)
            # Queued in this order: each waits behind the blocker.
            queued = Store.stats(store).queued
            eventually(fn -> assert Store.stats(store).queued == queued + 1 end)
            task
          end

        before = Store.stats(store)
        release.()
        assert {:ok, %Account{name: "blocker"}} = Task.await(blocker, 60_000)

        assert [
                 {:ok, %Account{name: "a"}},
                 {:error, :name_taken},
                 :ok,
                 :ok,
                 {:ok, %Account{id: b_id, device_id: "phone-b"}},
                 {:error, :device_taken}
               ] = Task.await_many(tasks, 60_000)

        # The blocker's transaction, then one for the six that waited.
        after_ = Store.stats(store)
        assert after_.transactions - before.transactions == 2
        assert after_.batched_writes - before.batched_writes == 7
        assert %{errors: 0, expired: 0} = after_

        assert {:ok, {1, 2}} = Store.fetch_position(store, taken.id)
        assert {:ok, "state"} = Store.fetch_state(store, "zones", "1,1")
        assert {:ok, %{account_id: ^b_id, revoked: false}} = Store.fetch_token(store, "token-b")
      end

      @tag store: [max_batch: 1]
      test "with a batch of one, commits every write on its own", %{store: store} do
        results =
          1..20
          |> Enum.map(fn i ->
            Task.async(fn -> Store.create_account(store, %{name: "n#{i}"}) end)
          end)
          |> Task.await_many()

        assert Enum.all?(results, &match?({:ok, _}, &1))
        assert %{transactions: 20, batched_writes: 20} = Store.stats(store)
      end

      @tag :capture_log
      test "a token recorded with its account needs a fresh id", %{store: store} do
        {:ok, first} = Store.create_account(store, %{token: %{id: "t1", expires_at: 9}})
        assert {:ok, %{account_id: id}} = Store.fetch_token(store, "t1")
        assert id == first.id

        # The account is not made without its token.
        assert {:error, :unavailable} =
                 Store.create_account(store, %{name: "twin", token: %{id: "t1", expires_at: 9}})

        assert {:error, :not_found} = Store.fetch_account(store, {:name, "twin"})

        assert_raise ArgumentError, fn ->
          Store.create_account(store, %{token: %{id: "", expires_at: 9}})
        end
      end

      test "a deadline already passed is answered at once, unsent", %{store: store} do
        deadline = System.monotonic_time(:millisecond) - 1
        assert {:error, :unavailable} = Store.create_account(store, %{}, deadline: deadline)
        assert %{timed_out: 1, completed: 0, queued: 0} = Store.stats(store)

        deadline = System.monotonic_time(:millisecond) + 60_000
        assert {:ok, _} = Store.create_account(store, %{}, deadline: deadline)
        assert_raise ArgumentError, fn -> Store.create_account(store, %{}, deadline: :soon) end
      end
    end

    describe "kill -9 under a storm" do
      @describetag store: false

      # Writers in another VM create accounts as fast as the store takes
      # them and note each acknowledgement in a file as it comes; the VM is
      # killed with SIGKILL in the middle, and every account it
      # acknowledged must be there after a restart. The VM kills itself as
      # soon as the count is reached: every account acknowledged is read
      # back, and each second the storm ran on past the count cost about as
      # long to read back (killed from the test, after calls to that busy
      # VM, a loaded machine's storm once ran on 1.4 s, to 10,501 accounts).
      test "loses nothing it acknowledged", context do
        %{store: store, store_opts: opts} = context

        dir =
          Path.join(
            System.tmp_dir!(),
            "grove-storm-#{System.pid()}-#{System.unique_integer([:positive])}"
          )

        on_exit(fn -> File.rm_rf(dir) end)

        peer = start_peer([])
        {:ok, _} = :peer.call(peer, Grove.StoreCase, :start_detached, [opts], 30_000)
        :ok = :peer.call(peer, Grove.StoreCase, :start_storm, [store, 50, dir], 30_000)

        # Killed from inside once the storm is well under way and writes
        # are grouped, the writers still writing.
        :ok = :peer.cast(peer, Grove.StoreCase, :kill_at, [store, 500, dir])
        assert_receive {:DOWN, _, :process, ^peer, _}, 45_000
        stats = storm_stats(dir)
        assert stats.batched_writes > stats.transactions

        start_supervised!({Store, opts})
        acked = storm_acks(dir)
        assert map_size(acked) >= 500

        # Read many at once, which the store takes in batches.
        lost =
          acked
          |> Task.async_stream(
            fn {device_id, id} ->
              case Store.fetch_account(store, {:device, device_id}, timeout: 30_000) do
                {:ok, %Account{id: ^id}} -> :kept
                other -> {device_id, id, other}
              end
            end,
            max_concurrency: 64,
            ordered: false,
            timeout: :infinity
          )
          |> Enum.reject(&(&1 == {:ok, :kept}))

        assert lost == []
      end
    end

    describe "start-up" do
      @describetag store: false

      test "migrates once: a second store and a restart find the data and the schema", context do
        %{store: store, store_opts: opts} = context
        start_supervised!({Store, opts}, id: :first)
        {:ok, ada} = Store.create_account(store, %{name: "ada"})
        :ok = Store.save_positions(store, [%{account_id: ada.id, x: 1, y: 2}])

        # A second store on the same database, while the first runs.
        second = Keyword.put(opts, :name, :"#{store}_second")
        start_supervised!({Store, second}, id: :second)
        assert {:ok, ^ada} = Store.fetch_account(second[:name], {:name, "ada"})

        # And the first again.
        :ok = stop_supervised(:first)
        assert {:error, :unavailable} = Store.fetch_account(store, {:id, ada.id})
        start_supervised!({Store, opts}, id: :first)
        assert {:ok, ^ada} = Store.fetch_account(store, {:id, ada.id})
        assert {:ok, {1, 2}} = Store.fetch_position(store, ada.id)

        assert schema_versions(context) == [1, 2]
      end

      test "two stores starting together on a new database both start", context do
        %{store: store, store_opts: opts} = context

        results =
          for index <- 1..2 do
            name = :"#{store}_#{index}"

            Task.async(fn ->
              {:ok, pid} = Store.start_link(Keyword.put(opts, :name, name))
              # Outlive the task: the test stops it.
              Process.unlink(pid)
              name
            end)
          end
          |> Task.await_many(30_000)

        on_exit(fn -> for name <- results, do: Supervisor.stop(name) end)

        for name <- results, do: assert({:ok, _} = Store.create_account(name, %{}))
        assert schema_versions(context) == [1, 2]
      end

      test "rejects bad options with ArgumentError naming them", %{store_opts: opts} do
        assert_raise ArgumentError, ~r/:queue_limit/, fn ->
          Store.start_link(Keyword.put(opts, :queue_limit, 0))
        end

        assert_raise ArgumentError, ~r/:timeout/, fn ->
          Store.start_link(Keyword.put(opts, :timeout, :soon))
        end

        assert_raise ArgumentError, ~r/:colour/, fn ->
          Store.start_link(Keyword.put(opts, :colour, :green))
        end

        assert_raise ArgumentError, ~r/:name/, fn ->
          Store.start_link(Keyword.delete(opts, :name))
        end
      end
    end

    describe "under load" do
      # One worker, a queue of three, and a database that waits long enough
      # for a lock for the test to see everything while it waits.
      @tag store:
             [pool_size: 1, queue_limit: 3] ++
               if(adapter == :sqlite,
                 do: [busy_timeout: 60_000],
                 else: [statement_timeout: 4_900]
               )
      test "a stalled database gets :unavailable at the deadline, from a bounded queue",
           context do
        %{store: store} = context
        release = hold_write_lock(context)

        # The only worker takes this write and waits for the lock.
        blocker =
          Task.async(fn -> Store.create_account(store, %{name: "blocker"}, timeout: 60_000) end)

        eventually(fn -> assert %{running: 1, queued: 0} = Store.stats(store) end)

        # Three more fill the queue; two more find it full. All have short
        # deadlines, and all are answered :unavailable.
        results =
          for index <- 1..5 do
            Task.async(fn -> Store.create_account(store, %{name: "w#{index}"}, timeout: 50) end)
          end
          |> Task.await_many()

        assert Enum.all?(results, &(&1 == {:error, :unavailable}))

        assert %{queued: 3, running: 1, rejected_full: 2, timed_out: 3, expired: 0, completed: 0} =
                 Store.stats(store)

        # While the queue is full, even reads are refused at once.
        assert {:error, :unavailable} = Store.fetch_account(store, {:name, "blocker"})
        assert %{rejected_full: 3, queued: 3} = Store.stats(store)

        # Once the lock goes, the blocked write completes and the backlog,
        # past its deadlines, is dropped unrun.
        release.()
        assert {:ok, %Account{name: "blocker"}} = Task.await(blocker, 60_000)
        eventually(fn -> assert %{queued: 0, running: 0, expired: 3} = Store.stats(store) end)

        for index <- 1..5,
            do: assert({:error, :not_found} = Store.fetch_account(store, {:name, "w#{index}"}))

        assert {:ok, _} = Store.create_account(store, %{name: "after"})
        assert %{completed: 7, errors: 0} = Store.stats(store)
      end

      test "counts what it does", %{store: store} do
        {:ok, _} = Store.create_account(store, %{name: "ada"})
        {:error, :name_taken} = Store.create_account(store, %{name: "ada"})
        {:error, :not_found} = Store.fetch_position(store, 1)

        assert %{
                 queued: 0,
                 running: 0,
                 completed: 3,
                 rejected_full: 0,
                 expired: 0,
                 timed_out: 0,
                 errors: 0
               } = Store.stats(store)
      end

      test "a store that is not running answers :unavailable", %{store: store} do
        assert {:error, :unavailable} = Store.fetch_account(:no_such_store, {:id, 1})

        assert {:error, :unavailable} =
                 Store.save_positions(:no_such_store, [%{account_id: 1, x: 0, y: 0}])

        assert %{queued: 0, completed: 0} = Store.stats(:no_such_store)
        assert {:error, :not_found} = Store.fetch_position(store, 1, timeout: 5_000)
      end
    end

    if adapter == :sqlite do
      describe "SQLite" do
        @describetag store: false

        test "runs in WAL mode in a directory it creates", %{store: store, store_opts: opts} do
          start_supervised!({Store, opts})
          {:ok, _} = Store.create_account(store, %{name: "ada"})
          assert File.exists?(opts[:path]) and File.exists?(opts[:path] <> "-wal")
        end

        @tag :capture_log
        test "keeps what it acknowledged when the store is killed", %{
          store: store,
          store_opts: opts
        } do
          {:ok, _} = Store.start_link(opts)
          {:ok, ada} = Store.create_account(store, %{name: "ada", password_hash: "h"})
          :ok = Store.save_positions(store, [%{account_id: ada.id, x: 3, y: 4}])
          :ok = Store.create_token(store, %{id: "t", account_id: ada.id, expires_at: 9})

          kill_store(store)
          assert {:error, :unavailable} = Store.fetch_account(store, {:id, ada.id})

          start_supervised!({Store, opts})
          assert {:ok, ^ada} = Store.fetch_account(store, {:id, ada.id})
          assert {:ok, {3, 4}} = Store.fetch_position(store, ada.id)
          assert {:ok, %{account_id: _, revoked: false}} = Store.fetch_token(store, "t")
        end

        test "keeps what it acknowledged when its whole VM is killed", context do
          %{store: store, store_opts: opts} = context
          peer = start_peer([])
          {:ok, _} = :peer.call(peer, Grove.StoreCase, :start_detached, [opts], 30_000)
          {:ok, ada} = :peer.call(peer, Store, :create_account, [store, %{name: "ada"}])

          :ok =
            :peer.call(peer, Store, :save_positions, [store, [%{account_id: ada.id, x: 5, y: 6}]])

          # SIGKILL: no port closes, no file is flushed or checkpointed.
          os_pid = :peer.call(peer, :os, :getpid, [])
          {_, 0} = System.cmd("kill", ["-KILL", to_string(os_pid)])
          assert_receive {:DOWN, _, :process, ^peer, _}, 10_000

          start_supervised!({Store, opts})
          assert {:ok, ^ada} = Store.fetch_account(store, {:name, "ada"})
          assert {:ok, {5, 6}} = Store.fetch_position(store, ada.id)
        end
      end
    end

    if adapter == :postgres do
      describe "PostgreSQL" do
        @tag :capture_log
        test "answers at once while it cannot connect, and reconnects", context do
          %{store: store, store_opts: opts} = context
          {:ok, ada} = Store.create_account(store, %{name: "ada"})

          admin_sql(context, "ALTER DATABASE #{opts[:database]} ALLOW_CONNECTIONS false")
          assert drop_connections(context) == 2

          # With a deadline this far off, :unavailable can only be the
          # answer of a store that knows it has no connection.
          eventually(fn ->
            assert {:error, :unavailable} =
                     Store.fetch_account(store, {:id, ada.id}, timeout: 120_000)
          end)

          assert {:error, :unavailable} = Store.create_account(store, %{}, timeout: 120_000)
          assert %{queued: 0, running: 0, errors: errors} = Store.stats(store)
          assert errors >= 1

          admin_sql(context, "ALTER DATABASE #{opts[:database]} ALLOW_CONNECTIONS true")

          eventually(
            fn -> assert {:ok, ^ada} = Store.fetch_account(store, {:id, ada.id}) end,
            2000
          )
        end

        @tag store: false, capture_log: true
        test "does not start without a server", %{store_opts: opts} do
          {:ok, socket} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
          {:ok, closed_port} = :inet.port(socket)
          :gen_tcp.close(socket)
          Process.flag(:trap_exit, true)

          assert {:error, _} = Store.start_link(Keyword.put(opts, :port, closed_port))
        end
      end
    end
  end
end
